/* schedweb policy pages: the playground's live preview wiring, saving, and small page helpers.
 *
 * Live preview (templates/policies/playground.html): #policy-form posts on every pause in typing
 * (cel-editor:change, data-debounce 100 ms), on Ctrl/Cmd+Enter and when the pod, cluster or
 * compare inputs change. hx-sync="this:replace" aborts a request still in flight when a newer
 * one starts; on top of that every request carries a sequence number that the server echoes in
 * X-Preview-Seq, and an answer older than the latest request is dropped here, so only the latest
 * request's answer is ever rendered. An invalid document leaves the last good table in place,
 * marked outdated.
 * Also: Ctrl/Cmd+S saves; unsaved-changes flag and leave warning; a stale save (412) offers to
 * load the other draft while keeping the user's text aside; the picker's choice goes in the URL;
 * <dialog> openers; 403/409/412 answers shown in words.
 */
(function () {
  "use strict";

  const $ = (sel, root) => (root || document).querySelector(sel);

  // ------------------------------------------------------------------------------------------
  // Small page helpers (every policy page)
  // ------------------------------------------------------------------------------------------
  document.addEventListener("click", (e) => {
    const opener = e.target.closest("[data-dialog-open]");
    if (opener) {
      const dialog = $(opener.dataset.dialogOpen);
      if (dialog && dialog.showModal) dialog.showModal();
      return;
    }
    const closer = e.target.closest("[data-dialog-close]");
    if (closer) closer.closest("dialog")?.close();
  });

  function openDialogs() {
    for (const d of document.querySelectorAll("dialog[data-open-on-load]")) if (!d.open) d.showModal();
  }

  // Refusals and conflicts come back as text (403) or a fragment; say them in words, once.
  document.addEventListener("htmx:responseError", (e) => {
    const xhr = e.detail.xhr;
    if (![403, 409, 412].includes(xhr.status)) return;
    const type = xhr.getResponseHeader("Content-Type") || "";
    const text = type.startsWith("text/plain") ? xhr.responseText : `Refused (${xhr.status}).`;
    window.schedweb?.toast(text, { kind: "error" });
    e.stopPropagation(); // app.js would add a generic "Request failed" toast
  }, true);

  // ------------------------------------------------------------------------------------------
  // The playground
  // ------------------------------------------------------------------------------------------
  const form = $("#policy-form");
  if (!form) {
    document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", openDialogs) : openDialogs();
    return;
  }

  let seq = 0; // number of the latest preview request sent
  let sentAt = 0; // performance.now() when it was sent
  let savedText = null; // the text of the saved draft, for the unsaved-changes flag
  let saving = null; // the text being saved

  const editor = () => window.CelEditor && window.CelEditor.get("#policy-editor");
  const textarea = () => $("#policy-editor");

  const playground = {
    revision: () => (editor() ? editor().revision : 0),
    nextSeq: () => {
      seq += 1;
      sentAt = performance.now();
      return seq;
    },
    latestSeq: () => seq,
    settledRevision: null, // the editor revision of the last answer fully on the page (markers too)
    lastPreviewMs: null, // request sent -> answer swapped
  };
  window.playground = playground;

  function isDirty() {
    return savedText !== null && textarea() && textarea().value !== savedText;
  }

  function updateDirty() {
    const flag = $("#dirty-flag");
    if (flag) flag.hidden = !isDirty();
  }

  // Drop answers older than the latest request (belt and braces with hx-sync replace).
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    const xhr = e.detail.xhr;
    if (e.detail.requestConfig?.elt === form) {
      const answered = Number(xhr.getResponseHeader("X-Preview-Seq") || 0);
      if (answered && answered < seq) {
        e.detail.shouldSwap = false;
        return;
      }
      const filter = $("#nodes-filter");
      playground._filter = filter ? filter.value : "";
    }
    // A stale save answers 412 with a fragment that explains it: show it.
    if (xhr.status === 412 && e.detail.requestConfig?.elt?.id === "save-button") {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });

  document.body.addEventListener("htmx:afterSwap", (e) => {
    const config = e.detail.requestConfig;
    if (!config || config.elt !== form) return;
    const state = e.detail.xhr.getResponseHeader("X-Preview-State");
    const result = $("#preview-result");
    if (result) result.classList.toggle("is-outdated", state === "invalid");
    // keep the node filter the user typed across the table's re-render
    const filter = $("#nodes-filter");
    if (filter && playground._filter) {
      filter.value = playground._filter;
      filter.dispatchEvent(new Event("input", { bubbles: true }));
    }
    playground.lastPreviewMs = performance.now() - sentAt;
  });

  document.body.addEventListener("htmx:afterSettle", (e) => {
    if (e.detail.requestConfig?.elt !== form) return;
    playground.settledRevision = e.detail.xhr.getResponseHeader("X-Preview-Revision");
    const chip = $("#preview-updated");
    if (chip) chip.hidden = !resultsOutOfSight();
  });

  // On a phone the results sit under the editor, out of sight while one types: a chip says an
  // answer landed and takes the reader there; it goes once the results are on screen.
  function resultsOutOfSight() {
    const result = $("#preview-result");
    if (!result) return false;
    const box = result.getBoundingClientRect();
    return box.top > window.innerHeight || box.bottom < 0;
  }
  window.addEventListener("scroll", () => {
    const chip = $("#preview-updated");
    if (chip && !chip.hidden && !resultsOutOfSight()) chip.hidden = true;
  }, { passive: true });
  document.addEventListener("click", (e) => {
    const chip = e.target.closest("#preview-updated");
    if (!chip) return;
    e.preventDefault();
    $("#preview-result")?.scrollIntoView({ block: "start" });
    chip.hidden = true;
  });

  // Saving -----------------------------------------------------------------------------------
  document.body.addEventListener("htmx:beforeRequest", (e) => {
    if (e.detail.elt?.id === "save-button") saving = textarea().value;
  });

  document.body.addEventListener("htmx:afterRequest", (e) => {
    if (e.detail.elt?.id !== "save-button") return;
    if (e.detail.xhr.status === 200) {
      savedText = saving;
      updateDirty();
    }
  });

  function save() {
    const button = $("#save-button");
    if (button && !button.disabled) window.htmx.trigger(button, "click");
  }

  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && !e.altKey && (e.key === "s" || e.key === "S")) {
      if (!$("#save-button")) return; // viewers: the browser's own save
      e.preventDefault();
      save();
    }
  });

  document.addEventListener("click", (e) => {
    if (e.target.closest("[data-stale-load]")) loadTheirs();
    else if (e.target.closest("[data-stale-overwrite]")) overwrite();
    else if (e.target.closest("[data-restore-mine]")) restoreMine();
  });

  function staleInfo() {
    const info = $("#stale-info");
    const text = $("#stale-draft");
    return info && text ? { etag: info.dataset.etag, revision: info.dataset.revision, text: JSON.parse(text.textContent) } : null;
  }

  /** Load the other person's draft into the editor; keep the user's text aside to copy back. */
  function loadTheirs() {
    const theirs = staleInfo();
    if (!theirs) return;
    const mine = textarea().value;
    $("#if-match").value = theirs.etag;
    savedText = theirs.text;
    editor().setValue(theirs.text);
    const box = $("#save-answer");
    box.innerHTML = "";
    const alert = document.createElement("div");
    alert.className = "alert alert--info pg-mine";
    alert.setAttribute("role", "status");
    alert.innerHTML =
      '<div class="alert-body"><p class="alert-title">Loaded revision ' + theirs.revision +
      '. Your text is kept below.</p><textarea readonly rows="6" id="my-text" aria-label="Your unsaved text"></textarea>' +
      '<div class="hstack"><button type="button" class="btn btn--sm" data-restore-mine>Put my text back in the editor</button>' +
      '<button type="button" class="btn btn--sm btn--ghost" data-copy="#my-text"><span data-copy-label>Copy my text</span></button></div></div>' +
      '<button type="button" class="close-btn" data-dismiss aria-label="Dismiss">&times;</button>';
    alert.querySelector("textarea").value = mine;
    box.appendChild(alert);
    $("#save-status").textContent = "revision " + theirs.revision + " loaded";
    updateDirty();
  }

  function restoreMine() {
    const mine = $("#my-text");
    if (mine) editor().setValue(mine.value);
    updateDirty();
  }

  /** Save the user's text over the other draft: an explicit choice, with the new ETag. */
  function overwrite() {
    const theirs = staleInfo();
    if (!theirs) return;
    $("#if-match").value = theirs.etag;
    $("#save-answer").innerHTML = "";
    save();
  }

  // Inputs ------------------------------------------------------------------------------------
  /** Keep the chosen pod, cluster and compare mode in the URL (shareable, survives reload). */
  function syncUrl() {
    const url = new URL(window.location.href);
    const pod = $("#pod-select")?.value;
    if (pod) url.searchParams.set("pod", pod);
    const cluster = $("#cluster-select")?.value;
    if (cluster) url.searchParams.set("cluster", cluster);
    else url.searchParams.delete("cluster");
    if ($("#compare-toggle")?.checked) url.searchParams.set("compare", "1");
    else url.searchParams.delete("compare");
    history.replaceState(history.state, "", url);
  }

  document.addEventListener("change", (e) => {
    if (e.target.id === "pod-select") {
      const paste = $("#pod-paste");
      if (paste) paste.hidden = e.target.value !== "pasted";
      if (e.target.value === "pasted") $("#pod-yaml")?.focus();
    }
    if (["pod-select", "cluster-select", "compare-toggle"].includes(e.target.id)) syncUrl();
  });

  document.addEventListener("input", (e) => {
    if (e.target.id === "policy-editor") updateDirty();
  });

  // What-if: an applied edit's × removes it (its `- ` item) from the list, and the preview follows.
  document.addEventListener("click", (e) => {
    const undo = e.target.closest("[data-undo-edit]");
    const area = $("#what-if");
    if (!undo || !area) return;
    const lines = area.value.split("\n");
    const starts = lines.flatMap((line, i) => (/^-\s/.test(line) ? [i] : []));
    const n = Number(undo.dataset.undoEdit);
    if (n >= starts.length) return;
    const end = n + 1 < starts.length ? starts[n + 1] : lines.length;
    lines.splice(starts[n], end - starts[n]);
    area.value = lines.join("\n");
    area.dispatchEvent(new Event("input", { bubbles: true }));
  });

  // The node editor (policies/ui/node_editor.py): a row's or a drill-down's [data-edit-node]
  // loads the node's form into the modal <dialog> (showModal: the page behind is inert, so
  // focus stays in it; Escape closes it); an applied form answers with what-if lines, appended
  // to the what-if text (the one source of truth), which reruns the preview.
  let nodeEditorOpener = null;
  document.addEventListener("click", (e) => {
    const opener = e.target.closest("[data-edit-node]");
    const dialog = $("#node-editor");
    if (opener && dialog) {
      nodeEditorOpener = opener.closest("#node-drill") ? null : opener;
      $("#node-editor-node").value = opener.dataset.editNode;
      htmx.trigger("#node-editor-open", "submit");
      return;
    }
    const add = e.target.closest("[data-row-add]");
    if (add) {
      const row = $(`#ne-row-${add.dataset.rowAdd}`).content.firstElementChild.cloneNode(true);
      $(`[data-rows="${add.dataset.rowAdd}"]`).append(row);
      row.querySelector("input").focus();
      return;
    }
    const remove = e.target.closest("[data-row-remove]");
    if (remove) {
      const group = remove.closest("fieldset");
      remove.closest("[data-row]").remove();
      group.querySelector("[data-row-add]").focus();
    }
  });

  document.body.addEventListener("htmx:afterSwap", (e) => {
    const dialog = $("#node-editor");
    if (!dialog || e.detail.target !== dialog) return;
    const edits = $("#node-editor-edits");
    if (edits) {
      const area = $("#what-if");
      const text = area.value.replace(/\s+$/, "");
      area.value = (text ? `${text}\n` : "") + JSON.parse(edits.textContent).replace(/\n$/, "");
      $("#what-if-panel").open = true;
      dialog.close();
      area.dispatchEvent(new Event("input", { bubbles: true }));
      return;
    }
    if (!dialog.open) dialog.showModal();
    const first = dialog.querySelector("[aria-invalid='true']") || dialog.querySelector("input:not([type=hidden]), button");
    if (first) first.focus();
  });

  // Tab and Shift+Tab wrap around inside the dialog (showModal makes the page inert, but Tab
  // past the last control would leave for the browser's own UI).
  document.addEventListener("keydown", (e) => {
    const dialog = e.key === "Tab" && e.target.closest?.("#node-editor");
    if (!dialog) return;
    const stops = [...dialog.querySelectorAll("button, input:not([type=hidden]), select, a[href]")]
      .filter((el) => !el.disabled && el.offsetParent !== null);
    const [first, last] = [stops[0], stops[stops.length - 1]];
    if (e.shiftKey ? e.target === first : e.target === last) {
      e.preventDefault();
      (e.shiftKey ? last : first).focus();
    }
  });

  document.addEventListener("close", (e) => {
    if (e.target.id !== "node-editor") return;
    const back = nodeEditorOpener && document.contains(nodeEditorOpener) ? nodeEditorOpener : null;
    (back || $(`[data-edit-node="${CSS.escape($("#node-editor-node").value)}"]`))?.focus();
  }, true);

  // Pod search: a found pod becomes the picker's choice (in a "Found" group) and is previewed.
  document.addEventListener("click", (e) => {
    const match = e.target.closest(".pg-pod-match");
    if (!match) return;
    const select = $("#pod-select");
    if (!select) return;
    let option = [...select.options].find((o) => o.value === match.dataset.pod);
    if (!option) {
      let group = select.querySelector("optgroup[data-found]");
      if (!group) {
        group = document.createElement("optgroup");
        group.label = "Found";
        group.dataset.found = "";
        select.prepend(group);
      }
      option = new Option(match.dataset.pod, match.dataset.pod);
      group.appendChild(option);
    }
    select.value = match.dataset.pod;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    $("#pod-matches").replaceChildren();
    $("#pod-search").value = "";
  });

  window.addEventListener("beforeunload", (e) => {
    if (isDirty() && $("#save-button")) {
      e.preventDefault();
      e.returnValue = "";
    }
  });

  // ------------------------------------------------------------------------------------------
  // Node drill-down: a node's name in the table opens its section (from the
  // <template id=node-drills>) in #node-drill; the open node stays open when the next
  // preview swaps in.
  // ------------------------------------------------------------------------------------------
  let drillNode = null;

  function showDrill(node) {
    const panel = $("#node-drill");
    if (!panel) return;
    // a <template>: its sections are parsed but neither laid out nor scanned by htmx
    const drills = $("#node-drills");
    const section = node && drills && [...drills.content.querySelectorAll("[data-drill]")]
      .find((s) => s.dataset.drill === node);
    for (const row of document.querySelectorAll("#nodes tr.is-drilled")) row.classList.remove("is-drilled");
    if (!section) {
      panel.hidden = true;
      panel.replaceChildren();
      return;
    }
    panel.replaceChildren(section.cloneNode(true));
    const close = document.createElement("button");
    close.type = "button";
    close.className = "btn btn--ghost btn--sm pg-drill-close";
    close.textContent = "Close";
    panel.prepend(close);
    panel.hidden = false;
    [...document.querySelectorAll("#nodes tr[data-node]")]
      .find((r) => r.dataset.node === node)?.classList.add("is-drilled");
  }

  document.addEventListener("click", (e) => {
    const opener = e.target.closest(".pg-drill-open");
    if (opener) {
      drillNode = drillNode === opener.dataset.node ? null : opener.dataset.node;
      showDrill(drillNode);
      return;
    }
    if (e.target.closest(".pg-drill-close")) {
      drillNode = null;
      showDrill(null);
    }
  });

  document.addEventListener("htmx:afterSettle", () => {
    if (drillNode) showDrill(drillNode);
    applyColumns();
    applyPins();
  });

  // ------------------------------------------------------------------------------------------
  // "All columns": each rule's and plugin's column (hidden by default so that the final total
  // and its breakdown fit without sideways scrolling). The choice is kept for the session and
  // re-applied to every preview that swaps in.
  // ------------------------------------------------------------------------------------------
  let allColumns = sessionStorage.getItem("schedweb.allColumns") === "1";

  function applyColumns() {
    const box = $("#nodes-all-columns");
    if (box) box.checked = allColumns;
    $("#nodes")?.classList.toggle("pg-nodes-table--all", allColumns);
  }

  // What "Add as test case" pins: the author's ticks survive the next preview (which renders
  // the choices again with this pod's labels); untouched boxes keep their defaults.
  const pinChoice = new Map();

  function applyPins() {
    for (const box of document.querySelectorAll("#test-pins input[name=pin]")) {
      if (pinChoice.has(box.value) && !box.disabled) box.checked = pinChoice.get(box.value);
    }
  }

  document.addEventListener("change", (e) => {
    if (e.target.id === "nodes-all-columns") {
      allColumns = e.target.checked;
      sessionStorage.setItem("schedweb.allColumns", allColumns ? "1" : "0");
      applyColumns();
    } else if (e.target.matches?.("#test-pins input[name=pin]")) {
      pinChoice.set(e.target.value, e.target.checked);
    }
  });

  function init() {
    openDialogs();
    applyColumns();
    // The saved draft: the editor's text, unless the page opened a version (?version=N).
    const saved = $("#saved-draft");
    savedText = saved ? JSON.parse(saved.textContent) : textarea()?.value ?? null;
    updateDirty();
  }

  document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", init) : init();
})();
