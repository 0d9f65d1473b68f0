/**
 * The language reference's search (templates/help/policies.html): the text is all in the page,
 * so the search runs here, with no service behind it. Each h2/h3 starts a section; a query
 * hides the sections (and contents entries) without it and marks its matches. Escape clears.
 */
(function () {
  "use strict";
  const body = document.getElementById("reference-body");
  const input = document.getElementById("reference-search");
  const count = document.getElementById("reference-count");
  const toc = document.getElementById("reference-toc");
  if (!body || !input) return;

  if (toc && window.matchMedia("(max-width: 960px)").matches && !location.hash) toc.open = false;

  // sections: a heading and the elements up to the next h2/h3 ("" for the text before the first)
  const sections = [];
  let current = { id: "", nodes: [] };
  for (const el of Array.from(body.children)) {
    if (el.matches("h2, h3")) {
      sections.push(current);
      current = { id: el.id, nodes: [el] };
    } else {
      current.nodes.push(el);
    }
  }
  sections.push(current);

  function unmark() {
    for (const mark of Array.from(body.querySelectorAll("mark"))) {
      const parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    }
  }

  function mark(el, query) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.nodeValue.toLowerCase().includes(query) && !node.parentNode.closest(".md-anchor")) {
        hits.push(node);
      }
    }
    for (const node of hits) {
      const text = node.nodeValue;
      const lower = text.toLowerCase();
      const frag = document.createDocumentFragment();
      let at = 0;
      for (let i = lower.indexOf(query); i !== -1; i = lower.indexOf(query, at)) {
        frag.append(text.slice(at, i));
        const m = document.createElement("mark");
        m.textContent = text.slice(i, i + query.length);
        frag.append(m);
        at = i + query.length;
      }
      frag.append(text.slice(at));
      node.parentNode.replaceChild(frag, node);
    }
  }

  function search() {
    const query = input.value.trim().toLowerCase();
    unmark();
    let shown = 0;
    for (const section of sections) {
      const hit = !query || section.nodes.some((n) => n.textContent.toLowerCase().includes(query));
      for (const n of section.nodes) {
        n.hidden = !hit;
        if (hit && query) mark(n, query);
      }
      const entry = section.id && toc && toc.querySelector(`[data-toc="${CSS.escape(section.id)}"]`);
      if (entry) entry.parentElement.hidden = !hit;
      if (hit && section.id) shown += 1;
    }
    count.textContent = query
      ? shown
        ? `${shown} section${shown === 1 ? "" : "s"} match`
        : "No section matches"
      : "";
  }

  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(search, 120);
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && input.value) {
      input.value = "";
      search();
    }
  });
  // a link to a section hidden by the search shows everything again
  window.addEventListener("hashchange", () => {
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.hidden) {
      input.value = "";
      search();
      target.scrollIntoView();
    }
  });
})();
