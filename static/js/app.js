/* schedweb progressive-enhancement helpers. Pages work without this file; with it they get:
 *   table[data-sortable]        click (or Enter/Space on) a header to sort; numbers sort as numbers
 *   input[data-filter-table]    filters the rows of the table it names ("gpu", "verdict:reject")
 *   button[data-copy]           copies a target's text (or the enclosing code block's)
 *   schedweb.toast(msg, opts)   toasts; also from the server via `HX-Trigger: {"toast": {...}}`
 *   time[data-relative]         "3 s ago", kept current; data-stale-after="30" marks it stale
 *   [data-tabs], [data-split], [data-theme-toggle], details.menu
 *   form[data-confirm]          asks before submitting (the text is the question; a submit
 *                               button's own data-confirm wins)
 *   [data-nav-toggle]           opens and closes the main navigation on narrow screens
 * Everything is (re)initialised on content that htmx swaps in (htmx:load), and a table's sort and
 * filter survive a swap of the table (the live preview re-renders it on every keystroke).
 */
(function () {
  "use strict";

  // Runs in the capture phase, before htmx's own submit handler on htmx-driven forms.
  // The question is the submit button's own data-confirm when it has one (several buttons, one form).
  document.addEventListener("submit", (e) => {
    const question = e.submitter?.dataset.confirm || e.target.closest("form[data-confirm]")?.dataset.confirm;
    if (question && !window.confirm(question)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);

  // The main navigation's menu button (shown on narrow screens only, by CSS).
  function setNav(open) {
    const toggle = document.querySelector("[data-nav-toggle]");
    if (!toggle) return;
    toggle.closest(".topbar")?.classList.toggle("nav-open", open);
    toggle.setAttribute("aria-expanded", String(open));
  }
  document.addEventListener("click", (e) => {
    const toggle = e.target.closest("[data-nav-toggle]");
    if (toggle) return setNav(toggle.getAttribute("aria-expanded") !== "true");
    if (!e.target.closest("#main-nav")) setNav(false);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && document.querySelector(".topbar.nav-open")) {
      setNav(false);
      document.querySelector("[data-nav-toggle]")?.focus();
    }
  });

  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  const NUMBER = /^[-+\u2212]?(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?%?$/i;

  // ------------------------------------------------------------------------------------------
  // Sortable tables
  // ------------------------------------------------------------------------------------------
  const sortState = new Map(); // table id -> {col, dir}: re-applied when htmx swaps the table in

  function cellValue(cell) {
    if (!cell) return "";
    const v = cell.dataset.sortValue;
    return (v !== undefined ? v : cell.textContent).trim();
  }

  /** "1,024" -> 1024, "75%" -> 75, "\u22123" -> -3; null when the text is not a number. */
  function parseNumber(text) {
    const s = text.replace(/[,\s\u00a0\u202f]/g, "").replace("\u2212", "-");
    if (!NUMBER.test(s)) return null;
    return parseFloat(s);
  }

  function isEmpty(text) {
    return text === "" || text === "\u2014" || text === "-" || text === "n/a";
  }

  function headerCells(table) {
    const head = table.tHead;
    return head ? Array.from(head.rows[head.rows.length - 1].cells) : [];
  }

  function columnIsNumeric(table, col, th) {
    if (th.dataset.type) return th.dataset.type === "number";
    if (th.classList.contains("num")) return true;
    let seen = 0;
    for (const row of bodyRows(table)) {
      const text = cellValue(row.cells[col]);
      if (isEmpty(text)) continue;
      if (parseNumber(text) === null) return false;
      if (++seen > 50) break;
    }
    return seen > 0;
  }

  function bodyRows(table) {
    const rows = [];
    for (const tbody of table.tBodies) {
      for (const row of tbody.rows) if (!row.classList.contains("filter-empty")) rows.push(row);
    }
    return rows;
  }

  /** Sort `table` by column `col`, "ascending" or "descending"; empty cells always go last. */
  function sortTable(table, col, dir) {
    const th = headerCells(table)[col];
    if (!th) return;
    const numeric = columnIsNumeric(table, col, th);
    const sign = dir === "descending" ? -1 : 1;
    const tbody = table.tBodies[0];
    const keyed = bodyRows(table).map((row, index) => {
      const text = cellValue(row.cells[col]);
      const empty = isEmpty(text);
      let key = text;
      if (numeric && !empty) {
        const n = parseNumber(text);
        key = n === null ? -Infinity : n;
      }
      return { row, index, empty, key };
    });
    keyed.sort((a, b) => {
      if (a.empty !== b.empty) return a.empty ? 1 : -1;
      let c = numeric ? a.key - b.key : collator.compare(a.key, b.key);
      if (c !== 0 && !Number.isNaN(c)) return sign * c;
      return a.index - b.index; // stable
    });
    const frag = document.createDocumentFragment();
    for (const k of keyed) frag.appendChild(k.row);
    const empty = tbody.querySelector(":scope > .filter-empty");
    tbody.insertBefore(frag, empty);
    for (const h of headerCells(table)) if (h !== th) h.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir);
    if (table.id) sortState.set(table.id, { col, dir });
    table.dispatchEvent(new CustomEvent("table:sorted", { bubbles: true, detail: { col, dir } }));
  }

  function initSortable(table) {
    if (table.dataset.sortableReady) return;
    table.dataset.sortableReady = "1";
    headerCells(table).forEach((th, col) => {
      if (th.hasAttribute("data-nosort") || th.querySelector(".sort-btn")) return;
      const btn = document.createElement("button");
      btn.type = "button";
      btn.className = "sort-btn";
      while (th.firstChild) btn.appendChild(th.firstChild);
      th.appendChild(btn);
      btn.addEventListener("click", () => {
        const current = th.getAttribute("aria-sort");
        // Numbers start high-to-low (best scores first), text starts A-Z; then it toggles.
        const first = columnIsNumeric(table, col, th) ? "descending" : "ascending";
        const dir = current ? (current === "ascending" ? "descending" : "ascending") : first;
        sortTable(table, col, dir);
      });
    });
    const saved = table.id && sortState.get(table.id);
    if (saved) sortTable(table, saved.col, saved.dir);
  }

  // ------------------------------------------------------------------------------------------
  // Table filter: every whitespace-separated term must match; "column:value" matches one column
  // (the column's data-key, or its header text in lower case without spaces).
  // ------------------------------------------------------------------------------------------
  const rowText = new WeakMap();

  function filterTarget(input) {
    return document.querySelector(input.dataset.filterTable);
  }

  function columnKeys(table) {
    return headerCells(table).map((th) =>
      (th.dataset.key || th.textContent).trim().toLowerCase().replace(/\s+/g, ""),
    );
  }

  function parseQuery(query, keys) {
    const terms = [];
    for (const raw of query.toLowerCase().split(/\s+/)) {
      if (!raw) continue;
      const i = raw.indexOf(":");
      const col = i > 0 ? keys.indexOf(raw.slice(0, i)) : -1;
      if (col >= 0 && i < raw.length - 1) terms.push({ col, text: raw.slice(i + 1) });
      else terms.push({ col: -1, text: raw });
    }
    return terms;
  }

  /** Hide the rows of `table` not matching `query`; returns {shown, total}. */
  function filterTable(table, query) {
    const terms = parseQuery(query, columnKeys(table));
    const rows = bodyRows(table);
    let shown = 0;
    for (const row of rows) {
      let text = rowText.get(row);
      if (text === undefined) {
        text = row.textContent.toLowerCase();
        rowText.set(row, text);
      }
      const ok = terms.every((t) =>
        t.col >= 0
          ? (row.cells[t.col] ? row.cells[t.col].textContent.toLowerCase() : "").includes(t.text)
          : text.includes(t.text),
      );
      row.hidden = !ok;
      if (ok) shown++;
    }
    const tbody = table.tBodies[0];
    let empty = tbody && tbody.querySelector(":scope > .filter-empty");
    if (tbody && shown === 0 && rows.length > 0) {
      if (!empty) {
        empty = document.createElement("tr");
        empty.className = "filter-empty";
        const td = document.createElement("td");
        td.colSpan = headerCells(table).length || 1;
        empty.appendChild(td);
        tbody.appendChild(empty);
      }
      empty.cells[0].textContent = `No rows match \u201c${query.trim()}\u201d.`;
    } else if (empty) {
      empty.remove();
    }
    const detail = { shown, total: rows.length, query };
    table.dispatchEvent(new CustomEvent("table:filtered", { bubbles: true, detail }));
    return detail;
  }

  function applyFilter(input) {
    const table = filterTarget(input);
    if (!table) return;
    const { shown, total } = filterTable(table, input.value);
    const status = input.dataset.filterStatus && document.querySelector(input.dataset.filterStatus);
    if (status) {
      status.textContent = input.value.trim() ? `${shown} of ${total} rows` : `${total} rows`;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Copy to clipboard
  // ------------------------------------------------------------------------------------------
  function copyText(btn) {
    if (btn.dataset.copyText !== undefined) return btn.dataset.copyText;
    const sel = btn.dataset.copy;
    const target = sel ? document.querySelector(sel) : btn.closest(".code-block")?.querySelector("pre");
    if (!target) return "";
    return "value" in target && target.tagName !== "BUTTON" ? target.value : target.textContent;
  }

  async function writeClipboard(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    const ta = document.createElement("textarea"); // fallback for plain-http hosts
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.cssText = "position:fixed;opacity:0;top:0;left:0";
    document.body.appendChild(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    if (!ok) throw new Error("copy command refused");
  }

  async function onCopy(btn) {
    const label = btn.querySelector("[data-copy-label]") || btn;
    const before = btn.dataset.copyLabelBefore || label.textContent;
    btn.dataset.copyLabelBefore = before;
    try {
      await writeClipboard(copyText(btn));
      label.textContent = "Copied";
      btn.classList.add("copied");
    } catch (err) {
      toast("Could not copy to the clipboard: " + err.message, { kind: "error" });
      return;
    }
    clearTimeout(btn._copyTimer);
    btn._copyTimer = setTimeout(() => {
      label.textContent = before;
      btn.classList.remove("copied");
    }, 1500);
  }

  // ------------------------------------------------------------------------------------------
  // Toasts
  // ------------------------------------------------------------------------------------------
  const TOAST_MS = { success: 4000, info: 5000, warning: 8000, error: 0 }; // 0: stays until closed

  function dismiss(el) {
    if (!el || el.classList.contains("is-leaving")) return;
    el.classList.add("is-leaving");
    setTimeout(() => el.remove(), 200);
  }

  function armToast(el) {
    if (el.dataset.toastArmed) return;
    el.dataset.toastArmed = "1";
    const kind = ["success", "warning", "error"].find((k) => el.classList.contains("toast--" + k)) || "info";
    const ms = el.dataset.timeout !== undefined ? Number(el.dataset.timeout) : TOAST_MS[kind];
    if (ms > 0) {
      let timer = setTimeout(() => dismiss(el), ms);
      el.addEventListener("mouseenter", () => clearTimeout(timer));
      el.addEventListener("mouseleave", () => (timer = setTimeout(() => dismiss(el), ms / 2)));
    }
  }

  /** Show a toast. kind: info | success | warning | error; timeout in ms (0 = until closed). */
  function toast(message, { kind = "info", timeout } = {}) {
    const box = document.getElementById("toasts");
    if (!box) return null;
    const el = document.createElement("div");
    el.className = "toast toast--" + kind;
    el.setAttribute("role", kind === "error" ? "alert" : "status");
    el.dataset.toast = "";
    if (timeout !== undefined) el.dataset.timeout = String(timeout);
    const msg = document.createElement("div");
    msg.className = "toast-message";
    msg.textContent = message;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "close-btn";
    close.dataset.dismiss = "";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "\u00d7";
    el.append(msg, close);
    box.appendChild(el);
    while (box.children.length > 5) box.firstElementChild.remove();
    armToast(el);
    return el;
  }

  // ------------------------------------------------------------------------------------------
  // Relative times
  // ------------------------------------------------------------------------------------------
  /** "3 s ago", "5 min ago", "2 h ago", "4 d ago" (or "in 3 s"), from a difference in seconds. */
  function relativeTime(seconds) {
    const past = seconds >= 0;
    const s = Math.abs(Math.round(seconds));
    let text;
    if (s < 60) text = `${s} s`;
    else if (s < 3600) text = `${Math.floor(s / 60)} min`;
    else if (s < 86400) text = `${Math.floor(s / 3600)} h`;
    else text = `${Math.floor(s / 86400)} d`;
    return past ? `${text} ago` : `in ${text}`;
  }

  function updateTimes() {
    const now = Date.now();
    for (const el of document.querySelectorAll("time[data-relative]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(at)) continue;
      const age = (now - at) / 1000;
      const text = relativeTime(age);
      if (el.textContent !== text) el.textContent = text;
      if (!el.title) el.title = new Date(at).toLocaleString();
      if (el.dataset.staleAfter) el.classList.toggle("is-stale", age > Number(el.dataset.staleAfter));
    }
  }

  // ------------------------------------------------------------------------------------------
  // Tabs (buttons with role=tab inside [data-tabs]; panels named by aria-controls)
  // ------------------------------------------------------------------------------------------
  function selectTab(tab, focus) {
    const list = tab.closest("[data-tabs]");
    for (const t of list.querySelectorAll('[role="tab"]')) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      const panel = document.getElementById(t.getAttribute("aria-controls"));
      if (panel) panel.hidden = !on;
    }
    if (focus) tab.focus();
  }

  function onTabKey(e) {
    const tab = e.target.closest('[data-tabs] [role="tab"]');
    if (!tab) return;
    const tabs = Array.from(tab.closest("[data-tabs]").querySelectorAll('[role="tab"]'));
    let i = tabs.indexOf(tab);
    if (e.key === "ArrowRight") i = (i + 1) % tabs.length;
    else if (e.key === "ArrowLeft") i = (i - 1 + tabs.length) % tabs.length;
    else if (e.key === "Home") i = 0;
    else if (e.key === "End") i = tabs.length - 1;
    else return;
    e.preventDefault();
    selectTab(tabs[i], true);
  }

  // ------------------------------------------------------------------------------------------
  // Split pane divider: drag or arrow keys; the share is kept per data-split name
  // ------------------------------------------------------------------------------------------
  function setSplit(split, pct) {
    const v = Math.min(80, Math.max(20, pct));
    split.style.setProperty("--split", v.toFixed(1) + "%");
    const div = split.querySelector(":scope > .split-divider");
    if (div) div.setAttribute("aria-valuenow", String(Math.round(v)));
    try {
      localStorage.setItem("schedweb-split-" + split.dataset.split, v.toFixed(1));
    } catch (e) {
      /* storage may be unavailable */
    }
  }

  function initSplit(split) {
    if (split.dataset.splitReady) return;
    split.dataset.splitReady = "1";
    const div = split.querySelector(":scope > .split-divider");
    if (!div) return;
    div.setAttribute("role", "separator");
    div.setAttribute("aria-orientation", "vertical");
    div.setAttribute("aria-valuemin", "20");
    div.setAttribute("aria-valuemax", "80");
    if (!div.hasAttribute("aria-label")) div.setAttribute("aria-label", "Resize panes");
    div.tabIndex = 0;
    let saved = null;
    try {
      saved = localStorage.getItem("schedweb-split-" + split.dataset.split);
    } catch (e) {
      /* ignore */
    }
    if (saved) setSplit(split, Number(saved));
    else div.setAttribute("aria-valuenow", "50");
    div.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      div.setPointerCapture(e.pointerId);
      div.classList.add("is-dragging");
      const rect = split.getBoundingClientRect();
      const move = (ev) => setSplit(split, ((ev.clientX - rect.left) / rect.width) * 100);
      const up = () => {
        div.classList.remove("is-dragging");
        div.removeEventListener("pointermove", move);
        div.removeEventListener("pointerup", up);
      };
      div.addEventListener("pointermove", move);
      div.addEventListener("pointerup", up);
    });
    div.addEventListener("keydown", (e) => {
      const now = Number(div.getAttribute("aria-valuenow") || 50);
      const step = { ArrowLeft: -2, ArrowRight: 2, Home: -100, End: 100 }[e.key];
      if (step === undefined) return;
      e.preventDefault();
      setSplit(split, now + step);
    });
  }

  // ------------------------------------------------------------------------------------------
  // Theme: follow the system, or pin light / dark (stored in localStorage)
  // ------------------------------------------------------------------------------------------
  const THEMES = ["auto", "light", "dark"];
  const THEME_LABEL = { auto: "follow the system", light: "light", dark: "dark" };
  const THEME_ICON = {
    auto: '<circle cx="8" cy="8" r="6.25" fill="none" stroke="currentColor" stroke-width="1.5"/><path d="M8 1.75a6.25 6.25 0 0 1 0 12.5z" fill="currentColor"/>',
    light: '<circle cx="8" cy="8" r="3" fill="currentColor"/><path d="M8 1v2M8 13v2M1 8h2M13 8h2M3 3l1.4 1.4M11.6 11.6 13 13M3 13l1.4-1.4M11.6 4.4 13 3" stroke="currentColor" stroke-width="1.5" stroke-linecap="round"/>',
    dark: '<path d="M13.5 10.2A6 6 0 0 1 5.8 2.5a6 6 0 1 0 7.7 7.7z" fill="currentColor"/>',
  };

  function currentTheme() {
    const t = document.documentElement.dataset.theme;
    return t === "light" || t === "dark" ? t : "auto";
  }

  function renderThemeButton(btn) {
    const t = currentTheme();
    const label = "Color theme: " + THEME_LABEL[t];
    btn.setAttribute("aria-label", label);
    btn.title = label;
    const svg = btn.querySelector("svg");
    if (svg) svg.innerHTML = THEME_ICON[t];
  }

  function cycleTheme(btn) {
    const next = THEMES[(THEMES.indexOf(currentTheme()) + 1) % THEMES.length];
    if (next === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = next;
    try {
      if (next === "auto") localStorage.removeItem("schedweb-theme");
      else localStorage.setItem("schedweb-theme", next);
    } catch (e) {
      /* ignore */
    }
    renderThemeButton(btn);
  }

  // ------------------------------------------------------------------------------------------
  // Wiring
  // ------------------------------------------------------------------------------------------
  function init(root) {
    const scope = root && root.querySelectorAll ? root : document;
    const all = (sel) => {
      const found = Array.from(scope.querySelectorAll(sel));
      if (scope.matches && scope.matches(sel)) found.unshift(scope);
      return found;
    };
    all("table[data-sortable]").forEach(initSortable);
    all("[data-split]").forEach(initSplit);
    all("[data-toast]").forEach(armToast);
    all("[data-theme-toggle]").forEach(renderThemeButton);
    // A swapped-in table keeps the filter typed above it.
    for (const input of document.querySelectorAll("[data-filter-table]")) {
      const table = filterTarget(input);
      if (table && (scope === document || scope.contains(table) || table.contains(scope))) {
        if (input.value || input.dataset.filterStatus) applyFilter(input);
      }
    }
    updateTimes();
  }

  document.addEventListener("input", (e) => {
    if (e.target.matches && e.target.matches("[data-filter-table]")) applyFilter(e.target);
  });

  document.addEventListener("click", (e) => {
    const t = e.target.closest ? e.target : e.target.parentElement;
    if (!t) return;
    const copy = t.closest("[data-copy], [data-copy-text]");
    if (copy) return void onCopy(copy);
    const close = t.closest("[data-dismiss]");
    if (close) return void dismiss(close.closest(".toast, .alert"));
    const tab = t.closest('[data-tabs] [role="tab"]');
    if (tab) return void selectTab(tab, false);
    const theme = t.closest("[data-theme-toggle]");
    if (theme) return void cycleTheme(theme);
    for (const menu of document.querySelectorAll("details.menu[open]")) {
      if (!menu.contains(t)) menu.open = false;
    }
  });

  document.addEventListener("keydown", (e) => {
    onTabKey(e);
    if (e.key === "Escape") {
      for (const menu of document.querySelectorAll("details.menu[open]")) {
        menu.open = false;
        menu.querySelector("summary").focus();
      }
    }
    // "/" jumps to the page's table filter, unless the user is typing somewhere.
    if (e.key === "/" && !e.ctrlKey && !e.metaKey && !e.altKey) {
      const a = document.activeElement;
      const typing = a && (a.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName));
      const filter = document.querySelector("[data-filter-table]");
      if (!typing && filter) {
        e.preventDefault();
        filter.focus();
        filter.select();
      }
    }
  });

  // Server-sent toasts: `HX-Trigger: {"toast": {"message": "Published v3", "kind": "success"}}`.
  document.addEventListener("toast", (e) => {
    const d = e.detail || {};
    const message = d.message || d.value;
    if (message) toast(String(message), { kind: d.kind || "info" });
  });

  // Requests htmx could not complete say so, unless the page opted out with data-no-error-toast.
  document.addEventListener("htmx:responseError", (e) => {
    if (e.target.closest && e.target.closest("[data-no-error-toast]")) return;
    const xhr = e.detail.xhr;
    toast(`Request failed: ${xhr.status} ${xhr.statusText || ""}`.trim(), { kind: "error" });
  });
  document.addEventListener("htmx:sendError", (e) => {
    if (e.target.closest && e.target.closest("[data-no-error-toast]")) return;
    toast("Could not reach the schedweb server. Is it running?", { kind: "error" });
  });

  document.addEventListener("htmx:load", (e) => init(e.detail.elt));
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => init(document));
  } else {
    init(document);
  }
  setInterval(updateTimes, 1000);

  window.schedweb = Object.assign(window.schedweb || {}, {
    init,
    toast,
    sortTable,
    filterTable,
    relativeTime,
    parseNumber,
  });
})();
