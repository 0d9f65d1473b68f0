/* CelEditor: a dependency-free editor for schedweb policy documents (YAML with CEL inside).
 *
 * The <textarea> stays the source of truth (forms and htmx post it as usual). It is made
 * transparent and laid over a <pre> that shows the same text highlighted: YAML keys, strings,
 * numbers and comments, and CEL in the values of `expression:` and `message:` keys (roots
 * pod/node/variables/cluster, fields, functions, macros, operators, literals). Both layers share
 * one font, line height, padding and tab size, and never wrap, so a character's position is
 * (padding + column x char width, padding + line x line height) in both.
 *
 * API (also on `textarea.celEditor`, or CelEditor.get(textarea)):
 *   editor.setMarkers([{line, column, message, severity, endColumn?, source?}])  1-based positions
 *   editor.setCompletions({pod: [{name, type, doc}], node, resources, cluster, variables, types})
 *   editor.getValue() / setValue(text) / goTo(line, column) / focus() / revision
 * Events (bubbling, on the textarea):
 *   cel-editor:change   debounced after edits (data-debounce ms, default 300); detail {value, revision}
 *   cel-editor:preview  Ctrl/Cmd+Enter; detail {value, revision}
 * Markup: <textarea data-cel-editor data-completions="#json-id" data-markers="#json-id">;
 * markers can also arrive in swapped-in HTML:
 *   <script type="application/json" data-cel-markers-for="textarea-id" data-revision="7">[...]</script>
 * (a script whose data-revision is older than the editor's current revision is ignored: stale).
 */
(function () {
  "use strict";

  const ROOTS = new Set(["pod", "node", "variables", "cluster"]);
  // A member chain before the caret: identifiers, each optionally indexed (["k"], ['k'], [0]).
  const CHAIN = /(?<![\w.\]"'])((?:[A-Za-z_]\w*(?:\[(?:"[^"\]]*"|'[^'\]]*'|\d+)\])*\.)+)(\w*)$/;
  const SEGMENT = /([A-Za-z_]\w*)((?:\[[^\]]*\])*)\./g;
  const STRING_DOT = /(?:"[^"\\]*"|'[^'\\]*')\.(\w*)$/;

  /** The element type of `list(T)` (T) or `map(K, V)` (V), as the schema spells types. */
  function elementType(type) {
    const t = String(type);
    if (t.startsWith("list(") && t.endsWith(")")) return t.slice(5, -1);
    if (t.startsWith("map(") && t.endsWith(")")) {
      let depth = 0;
      for (let i = 4; i < t.length - 1; i++) {
        if (t[i] === "(") depth++;
        else if (t[i] === ")") depth--;
        else if (t[i] === "," && depth === 0) return t.slice(i + 1, -1).trim();
      }
    }
    return null;
  }
  const MACROS = new Set(["all", "exists", "exists_one", "map", "filter", "has"]);
  const CONSTS = new Set(["true", "false", "null"]);
  const TYPES = new Set(["int", "uint", "double", "bool", "string", "bytes", "list", "map", "type", "dyn", "null_type"]);
  const SEVERITY_RANK = { error: 3, warning: 2, info: 1 };
  const SEVERITY_GLYPH = { error: "\u00d7", warning: "!", info: "i" };
  const CEL_KEYS = ["expression", "message"];
  const TAB = "  ";

  const RE_WS = /\s+/y;
  const RE_IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
  const RE_NUMBER = /(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)[uU]?/y;
  const RE_STRING_START = /(?:[rR][bB]?|[bB][rR]?)?("""|'''|"|')/y;
  const RE_OPERATOR = /==|!=|<=|>=|&&|\|\||[<>+\-*/%!?:]/y;
  const RE_YAML_KEY = /("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[A-Za-z0-9_$][^:#]*?)(\s*)(:)(?=\s|$)/y;
  const RE_BLOCK = /[|>][-+0-9]*/y;

  const isMac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

  function esc(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  // ------------------------------------------------------------------------------------------
  // Tokenizer. A line is tokenized from the state the previous line left: "" (plain YAML),
  // "B:<indent>:c|s" (inside a block scalar, CEL or string), "P:<indent>" (a plain CEL value that
  // may continue on more-indented lines). Tokens: {t: text, c: class, cel: in CEL code}.
  // ------------------------------------------------------------------------------------------
  function tok(out, text, cls, cel) {
    if (text) out.push({ t: text, c: cls, cel: !!cel });
  }

  function nextNonSpace(src, i) {
    while (i < src.length && (src[i] === " " || src[i] === "\t")) i++;
    return src[i];
  }

  function prevSignificant(out) {
    for (let k = out.length - 1; k >= 0; k--) {
      if (!/^\s+$/.test(out[k].t)) return out[k];
    }
    return null;
  }

  /** Tokenize CEL source `src`; in a plain YAML scalar (`yamlPlain`) " #" starts a comment. */
  function celTokens(src, out, yamlPlain) {
    let i = 0;
    const n = src.length;
    while (i < n) {
      const ch = src[i];
      RE_WS.lastIndex = i;
      if (RE_WS.test(src)) {
        tok(out, src.slice(i, RE_WS.lastIndex), "", true);
        i = RE_WS.lastIndex;
        continue;
      }
      if (yamlPlain && ch === "#" && (i === 0 || /\s/.test(src[i - 1]))) {
        tok(out, src.slice(i), "tok-comment", false);
        return;
      }
      RE_STRING_START.lastIndex = i;
      const sm = RE_STRING_START.exec(src);
      if (sm) {
        const quote = sm[1];
        const raw = /[rR]/.test(sm[0].slice(0, sm[0].length - quote.length));
        let j = RE_STRING_START.lastIndex;
        let closed = false;
        while (j < n) {
          if (!raw && src[j] === "\\") {
            j += 2;
            continue;
          }
          if (src.startsWith(quote, j)) {
            j += quote.length;
            closed = true;
            break;
          }
          j++;
        }
        if (!closed) j = n;
        tok(out, src.slice(i, j), "tok-str", true);
        i = j;
        continue;
      }
      RE_NUMBER.lastIndex = i;
      if (/[0-9.]/.test(ch) && RE_NUMBER.test(src) && !(ch === "." && !/[0-9]/.test(src[i + 1] || ""))) {
        tok(out, src.slice(i, RE_NUMBER.lastIndex), "tok-num", true);
        i = RE_NUMBER.lastIndex;
        continue;
      }
      RE_IDENT.lastIndex = i;
      if (RE_IDENT.test(src)) {
        const word = src.slice(i, RE_IDENT.lastIndex);
        const prev = prevSignificant(out);
        const member = !!prev && prev.t === "." && prev.cel;
        const called = nextNonSpace(src, RE_IDENT.lastIndex) === "(";
        let cls;
        if (member) cls = called ? (MACROS.has(word) ? "tok-macro" : "tok-func") : "tok-field";
        else if (called) cls = MACROS.has(word) ? "tok-macro" : "tok-func";
        else if (CONSTS.has(word)) cls = "tok-const";
        else if (word === "in") cls = "tok-kw";
        else if (ROOTS.has(word)) cls = "tok-root";
        else if (TYPES.has(word)) cls = "tok-type";
        else cls = "tok-ident";
        tok(out, word, cls, true);
        i = RE_IDENT.lastIndex;
        continue;
      }
      RE_OPERATOR.lastIndex = i;
      if (RE_OPERATOR.test(src)) {
        tok(out, src.slice(i, RE_OPERATOR.lastIndex), "tok-op", true);
        i = RE_OPERATOR.lastIndex;
        continue;
      }
      if ("()[]{},.".includes(ch)) {
        tok(out, ch, "tok-punct", true);
        i++;
        continue;
      }
      tok(out, ch, "tok-invalid", true);
      i++;
    }
  }

  /** Index just past the closing quote of a YAML quoted scalar opened at `i`, or -1. */
  function quoteEnd(line, i) {
    const q = line[i];
    for (let j = i + 1; j < line.length; j++) {
      if (q === '"' && line[j] === "\\") {
        j++;
        continue;
      }
      if (line[j] === q) {
        if (q === "'" && line[j + 1] === "'") {
          j++;
          continue;
        }
        return j + 1;
      }
    }
    return -1;
  }

  function scalarClass(text) {
    if (/^[-+]?(\d[\d_]*(\.\d*)?([eE][-+]?\d+)?|\.\d+|0x[0-9a-fA-F]+|\.inf|\.nan)$/i.test(text)) return "tok-num";
    if (/^(true|false|null|~|True|False|Null|TRUE|FALSE|NULL)$/.test(text)) return "tok-const";
    if (/^[&*!]/.test(text)) return "tok-type";
    return "tok-value";
  }

  /** The rest of a line after a scalar: spaces, then an optional comment (else plain text). */
  function trailing(line, i, out) {
    RE_WS.lastIndex = i;
    if (RE_WS.test(line)) {
      tok(out, line.slice(i, RE_WS.lastIndex), "");
      i = RE_WS.lastIndex;
    }
    if (i < line.length) tok(out, line.slice(i), line[i] === "#" ? "tok-comment" : "tok-value");
  }

  function flowTokens(line, i, out) {
    while (i < line.length) {
      const ch = line[i];
      if ("[]{},:".includes(ch)) {
        tok(out, ch, "tok-yaml-punct");
        i++;
      } else if (ch === " " || ch === "\t") {
        const j = i;
        while (i < line.length && (line[i] === " " || line[i] === "\t")) i++;
        tok(out, line.slice(j, i), "");
      } else if (ch === "#") {
        tok(out, line.slice(i), "tok-comment");
        return;
      } else if (ch === '"' || ch === "'") {
        const end = quoteEnd(line, i);
        const j = end < 0 ? line.length : end;
        tok(out, line.slice(i, j), "tok-str");
        i = j;
      } else {
        const j = i;
        while (i < line.length && !"[]{},#".includes(line[i]) && !(line[i] === ":" && /\s|$/.test(line[i + 1] || ""))) i++;
        const word = line.slice(j, i);
        const core = word.trimEnd();
        tok(out, core, scalarClass(core));
        tok(out, word.slice(core.length), "");
      }
    }
  }

  /** A YAML value starting at `i`; returns the state for the next line. */
  function yamlValue(line, i, out, cel, keyCol) {
    RE_WS.lastIndex = i;
    if (RE_WS.test(line)) {
      tok(out, line.slice(i, RE_WS.lastIndex), "");
      i = RE_WS.lastIndex;
    }
    if (i >= line.length) return "";
    const ch = line[i];
    if (ch === "#") {
      tok(out, line.slice(i), "tok-comment");
      return "";
    }
    if (ch === "|" || ch === ">") {
      RE_BLOCK.lastIndex = i;
      RE_BLOCK.test(line);
      tok(out, line.slice(i, RE_BLOCK.lastIndex), "tok-yaml-punct");
      trailing(line, RE_BLOCK.lastIndex, out);
      return `B:${keyCol}:${cel ? "c" : "s"}`;
    }
    if (ch === '"' || ch === "'") {
      const end = quoteEnd(line, i);
      const stop = end < 0 ? line.length : end;
      if (cel) {
        tok(out, ch, "tok-yaml-punct");
        celTokens(line.slice(i + 1, end < 0 ? stop : stop - 1), out, false);
        if (end >= 0) tok(out, ch, "tok-yaml-punct");
      } else {
        tok(out, line.slice(i, stop), "tok-str");
      }
      trailing(line, stop, out);
      return "";
    }
    if (cel) {
      celTokens(line.slice(i), out, true);
      return `P:${keyCol}`;
    }
    if (ch === "[" || ch === "{") {
      flowTokens(line, i, out);
      return "";
    }
    let end = line.length;
    const hash = line.slice(i).search(/\s#/);
    if (hash >= 0) end = i + hash;
    const text = line.slice(i, end);
    const core = text.trimEnd();
    tok(out, core, scalarClass(core));
    tok(out, text.slice(core.length), "");
    if (end < line.length) tok(out, line.slice(end), "tok-comment");
    return "";
  }

  /** Tokens of one line, and the state the next line starts in. */
  function tokenizeLine(line, state, celKeys) {
    const out = [];
    if (state) {
      const [kind, indentText, flavor] = state.split(":");
      const indent = Number(indentText);
      const lead = line.length - line.trimStart().length;
      const blank = lead === line.length;
      if (kind === "B" && (blank || lead > indent)) {
        tok(out, line.slice(0, lead), "", flavor === "c");
        if (flavor === "c") celTokens(line.slice(lead), out, false);
        else tok(out, line.slice(lead), "tok-str");
        return { tokens: out, state };
      }
      if (kind === "P" && blank) {
        tok(out, line, "", true);
        return { tokens: out, state };
      }
      if (kind === "P" && lead > indent && line[lead] !== "#") {
        tok(out, line.slice(0, lead), "", true);
        celTokens(line.slice(lead), out, true);
        return { tokens: out, state };
      }
    }
    let i = line.length - line.trimStart().length;
    tok(out, line.slice(0, i), "");
    if (i >= line.length) return { tokens: out, state: "" };
    if (line[i] === "#") {
      tok(out, line.slice(i), "tok-comment");
      return { tokens: out, state: "" };
    }
    if (/^(---|\.\.\.)(\s|$)/.test(line.slice(i))) {
      tok(out, line.slice(i, i + 3), "tok-yaml-punct");
      trailing(line, i + 3, out);
      return { tokens: out, state: "" };
    }
    while (line[i] === "-" && (i + 1 === line.length || line[i + 1] === " ")) {
      tok(out, "-", "tok-yaml-punct");
      i++;
      const j = i;
      while (line[i] === " ") i++;
      tok(out, line.slice(j, i), "");
    }
    RE_YAML_KEY.lastIndex = i;
    const km = RE_YAML_KEY.exec(line);
    if (km) {
      const keyCol = i;
      const key = km[1].replace(/^["']|["']$/g, "");
      tok(out, km[1], "tok-key");
      tok(out, km[2], "");
      tok(out, ":", "tok-yaml-punct");
      const next = yamlValue(line, RE_YAML_KEY.lastIndex, out, celKeys.includes(key), keyCol);
      return { tokens: out, state: next };
    }
    return { tokens: out, state: yamlValue(line, i, out, false, i) };
  }

  function tokensHtml(tokens) {
    let html = "";
    for (const t of tokens) html += t.c ? `<span class="${t.c}">${esc(t.t)}</span>` : esc(t.t);
    return html;
  }

  /** Extent of a marker starting at offset `start` of `line`: the word, string or operator there. */
  function markerEnd(line, start) {
    if (start >= line.length) return start + 1;
    const ch = line[start];
    let j = start + 1;
    if (/\w/.test(ch)) {
      while (j < line.length && /\w/.test(line[j])) j++;
    } else if (ch === '"' || ch === "'") {
      while (j < line.length && line[j] !== ch) j += line[j] === "\\" ? 2 : 1;
      j = Math.min(line.length, j + 1);
    } else if (/[=!<>&|+\-*/%]/.test(ch)) {
      while (j < line.length && /[=!<>&|]/.test(line[j]) && j - start < 2) j++;
    }
    return j;
  }

  /** HTML of a line whose characters [start, end) carry marker severities. */
  function markedHtml(tokens, line, marks) {
    const sev = new Array(line.length + 1).fill(0);
    let beyond = 0;
    for (const m of marks) {
      const r = SEVERITY_RANK[m.severity];
      if (m.start >= line.length) beyond = Math.max(beyond, r);
      for (let k = m.start; k < Math.min(m.end, line.length); k++) sev[k] = Math.max(sev[k], r);
    }
    const names = ["", "info", "warning", "error"];
    let html = "";
    let pos = 0;
    for (const t of tokens) {
      let s = 0;
      while (s < t.t.length) {
        const level = sev[pos + s];
        let e = s + 1;
        while (e < t.t.length && sev[pos + e] === level) e++;
        let piece = esc(t.t.slice(s, e));
        if (t.c) piece = `<span class="${t.c}">${piece}</span>`;
        if (level) piece = `<span class="ce-mark ce-mark--${names[level]}">${piece}</span>`;
        html += piece;
        s = e;
      }
      pos += t.t.length;
    }
    if (beyond) html += `<span class="ce-mark ce-mark--${names[beyond]}"> </span>`;
    return html;
  }

  /** Visual column (tabs expanded to the tab size) of character offset `offset` in `line`. */
  function visualColumn(line, offset) {
    let col = 0;
    for (let k = 0; k < offset && k < line.length; k++) {
      col = line[k] === "\t" ? col + (TAB.length - (col % TAB.length)) : col + 1;
    }
    return col + Math.max(0, offset - line.length);
  }

  function offsetAtVisual(line, vcol) {
    let col = 0;
    for (let k = 0; k < line.length; k++) {
      const w = line[k] === "\t" ? TAB.length - (col % TAB.length) : 1;
      if (vcol < col + w) return k;
      col += w;
    }
    return line.length + Math.max(0, vcol - col);
  }

  function el(tag, cls, attrs) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  function readJson(selector) {
    if (!selector) return null;
    const node = document.querySelector(selector);
    if (!node) return null;
    try {
      return JSON.parse(node.textContent);
    } catch (err) {
      console.warn("cel-editor: invalid JSON in", selector, err);
      return null;
    }
  }

  const instances = new WeakMap();
  let uid = 0;

  // ------------------------------------------------------------------------------------------
  // The editor
  // ------------------------------------------------------------------------------------------
  class CelEditor {
    constructor(textarea, options = {}) {
      this.ta = textarea;
      this.id = textarea.id || `cel-editor-${++uid}`;
      textarea.id = this.id;
      this.celKeys = options.celKeys || CEL_KEYS;
      this.debounceMs = Number(options.debounceMs ?? textarea.dataset.debounce ?? 300);
      this.completions = {};
      this.markers = null; // null: never set; []: checked, no problems
      this.revision = 0;
      this.lineHtml = [];
      this.lineCount = 0;
      this.cache = new Map();
      this.comp = null; // the open completion list
      this.tabLeaves = false; // after Esc, Tab moves focus out (keyboard users are not trapped)
      this.stats = { lastRenderMs: 0, lastInputMs: 0, renders: 0, lastLinesTouched: 0, lastInputLinesTouched: 0 };
      this._build();
      this._measure();
      this.render();
      this.setCompletions(options.completions || readJson(textarea.dataset.completions) || {});
      const markers = options.markers || readJson(textarea.dataset.markers);
      if (markers) this.setMarkers(markers);
      this._bind();
      if (document.fonts && document.fonts.ready) {
        document.fonts.ready.then(() => {
          this._measure();
          this._syncScroll();
        });
      }
      instances.set(textarea, this);
      textarea.celEditor = this;
    }

    _build() {
      const ta = this.ta;
      const root = el("div", "cel-editor");
      if (ta.dataset.fill !== undefined) root.classList.add("cel-editor--fill");
      if (ta.dataset.height) root.style.setProperty("--ce-height", ta.dataset.height);
      const body = el("div", "ce-body");
      const gutter = el("div", "ce-gutter", { "aria-hidden": "true" });
      const gutterInner = el("div", "ce-gutter-inner");
      gutter.appendChild(gutterInner);
      const code = el("div", "ce-code");
      const layer = el("div", "ce-layer", { "aria-hidden": "true" });
      const active = el("div", "ce-active-line");
      const pre = el("pre", "ce-highlight");
      layer.append(active, pre);
      const measure = el("span", "ce-highlight", { "aria-hidden": "true" });
      measure.style.cssText = "position:absolute;visibility:hidden;padding:0;white-space:pre";
      measure.textContent = "x".repeat(100);
      const complete = el("div", "ce-complete", { hidden: "" });
      const list = el("ul", "", { role: "listbox", id: `${this.id}-listbox`, "aria-label": "Completions" });
      const doc = el("div", "ce-complete-doc");
      complete.append(list, doc);
      const tooltip = el("div", "ce-tooltip", { role: "tooltip", hidden: "", id: `${this.id}-tooltip` });
      ta.parentNode.insertBefore(root, ta);
      code.append(layer, measure, ta, complete, tooltip);
      body.append(gutter, code);
      const status = el("div", "ce-statusbar");
      const pos = el("span", "ce-pos");
      const counts = el("span", "ce-counts", { "aria-live": "polite", id: `${this.id}-counts` });
      const mod = isMac ? "\u2318" : "Ctrl";
      const hints = el("span", "ce-hints");
      hints.innerHTML =
        `<kbd>${mod}</kbd>+<kbd>Space</kbd> complete \u00b7 <kbd>${mod}</kbd>+<kbd>\u21b5</kbd> preview` +
        `<span class="ce-hint-leave"> \u00b7 <kbd>Esc</kbd> <kbd>Tab</kbd> leave editor</span>`;
      status.append(pos, counts, hints);
      const problems = el("ul", "ce-problems", { "aria-label": "Problems", hidden: "" });
      root.append(body, status, problems);
      ta.classList.add("ce-input");
      ta.setAttribute("wrap", "off");
      ta.setAttribute("spellcheck", "false");
      ta.setAttribute("autocomplete", "off");
      ta.setAttribute("autocapitalize", "off");
      ta.setAttribute("autocorrect", "off");
      ta.setAttribute("aria-autocomplete", "list");
      ta.setAttribute("aria-controls", list.id);
      const described = [ta.getAttribute("aria-describedby"), counts.id].filter(Boolean).join(" ");
      ta.setAttribute("aria-describedby", described);
      Object.assign(this, { root, body, gutter, gutterInner, code, layer, active, pre, measure, complete, list, doc, tooltip, status, pos, counts, problems });
    }

    _measure() {
      const cs = getComputedStyle(this.ta);
      this.charW = this.measure.getBoundingClientRect().width / 100 || 7.8;
      this.lineH = parseFloat(cs.lineHeight) || 20;
      this.padX = parseFloat(cs.paddingLeft) || 0;
      this.padY = parseFloat(cs.paddingTop) || 0;
    }

    _bind() {
      const ta = this.ta;
      ta.addEventListener("input", () => this._onInput());
      ta.addEventListener("scroll", () => this._syncScroll());
      ta.addEventListener("keydown", (e) => this._onKeyDown(e));
      ta.addEventListener("blur", () => {
        this.closeCompletion();
        this.tabLeaves = false;
      });
      ta.addEventListener("mousemove", (e) => this._onHover(e));
      ta.addEventListener("mouseleave", () => (this.tooltip.hidden = true));
      this._onSelection = () => {
        if (document.activeElement === ta) this._updateCaret();
      };
      document.addEventListener("selectionchange", this._onSelection);
      this.list.addEventListener("mousedown", (e) => {
        const li = e.target.closest("[role=option]");
        if (!li) return;
        e.preventDefault(); // keep the textarea focused
        this.acceptCompletion(Number(li.dataset.index));
      });
      this.problems.addEventListener("click", (e) => {
        const b = e.target.closest(".ce-problem");
        if (b) this.goTo(Number(b.dataset.line), Number(b.dataset.column), Number(b.dataset.length));
      });
    }

    // -- content ------------------------------------------------------------------------------
    getValue() {
      return this.ta.value;
    }

    setValue(text) {
      this.ta.value = text;
      this._onInput();
      this._syncScroll();
    }

    focus() {
      this.ta.focus();
    }

    _onInput() {
      const t0 = performance.now();
      this.revision++;
      this.render();
      this.stats.lastInputLinesTouched = this.stats.lastLinesTouched; // markers re-render later
      this._updateCaret();
      if (!this._inserting) this.updateCompletion(false);
      this.stats.lastInputMs = performance.now() - t0; // the whole keystroke: highlight, caret, completion
      clearTimeout(this._debounce);
      this._debounce = setTimeout(() => this._emit("cel-editor:change"), this.debounceMs);
    }

    _emit(name) {
      this.ta.dispatchEvent(
        new CustomEvent(name, { bubbles: true, detail: { value: this.ta.value, revision: this.revision } }),
      );
    }

    _tokenize(line, state) {
      const key = state + "\u0001" + line;
      let hit = this.cache.get(key);
      if (!hit) {
        if (this.cache.size > 5000) this.cache.clear();
        const r = tokenizeLine(line, state, this.celKeys);
        hit = { tokens: r.tokens, state: r.state, html: tokensHtml(r.tokens) };
        this.cache.set(key, hit);
      }
      return hit;
    }

    /** Re-highlight the document; only lines whose HTML changed touch the DOM. */
    render() {
      const t0 = performance.now();
      const lines = this.ta.value.split("\n");
      this.lines = lines;
      const byLine = this._markersByLine(lines);
      const next = new Array(lines.length);
      const states = new Array(lines.length);
      let state = "";
      for (let k = 0; k < lines.length; k++) {
        states[k] = state;
        const hit = this._tokenize(lines[k], state);
        const marks = byLine.get(k + 1);
        next[k] = marks ? markedHtml(hit.tokens, lines[k], marks) : hit.html;
        state = hit.state;
      }
      this.states = states;
      this._patch(next);
      if (lines.length !== this.lineCount) this._renderGutter(lines.length);
      // No layout reads here (they would force a synchronous reflow of the page on every
      // keystroke): when the textarea scrolls, its scroll event re-aligns the layers.
      this.stats.lastRenderMs = performance.now() - t0;
      this.stats.renders++;
    }

    _patch(next) {
      const old = this.lineHtml;
      const pre = this.pre;
      let start = 0;
      const min = Math.min(old.length, next.length);
      while (start < min && old[start] === next[start]) start++;
      let endOld = old.length;
      let endNew = next.length;
      while (endOld > start && endNew > start && old[endOld - 1] === next[endNew - 1]) {
        endOld--;
        endNew--;
      }
      const common = Math.min(endOld - start, endNew - start);
      // Lines whose DOM this render replaced, inserted or removed: what a keystroke costs.
      this.stats.lastLinesTouched = Math.max(endOld, endNew) - start;
      const kids = pre.children;
      for (let k = 0; k < common; k++) kids[start + k].innerHTML = next[start + k];
      if (endNew - start > common) {
        const ref = kids[start + common] || null;
        const frag = document.createDocumentFragment();
        for (let k = start + common; k < endNew; k++) {
          const div = document.createElement("div");
          div.className = "ce-line";
          div.innerHTML = next[k];
          frag.appendChild(div);
        }
        pre.insertBefore(frag, ref);
      } else {
        for (let k = endOld - 1; k >= start + common; k--) kids[k].remove();
      }
      this.lineHtml = next;
    }

    _renderGutter(count) {
      let html = "";
      for (let k = 1; k <= count; k++) html += `<div class="ce-ln">${k}</div>`;
      this.gutterInner.innerHTML = html;
      this.lineCount = count;
      const digits = String(count).length;
      this.root.style.setProperty("--ce-gutter-w", `${Math.max(52, 28 + digits * this.charW)}px`);
      this._decorateGutter();
      this._currentLn = null;
    }

    _syncScroll() {
      const x = this.ta.scrollLeft;
      const y = this.ta.scrollTop;
      this.layer.style.transform = `translate(${-x}px, ${-y}px)`;
      this.gutterInner.style.transform = `translateY(${-y}px)`;
      if (this.comp) this._positionCompletion();
      this.tooltip.hidden = true;
    }

    // -- caret ---------------------------------------------------------------------------------
    /** 1-based line and column of a character offset. */
    position(offset) {
      const v = this.ta.value;
      let line = 1;
      let start = 0;
      for (let k = v.indexOf("\n"); k !== -1 && k < offset; k = v.indexOf("\n", k + 1)) {
        line++;
        start = k + 1;
      }
      return { line, column: offset - start + 1 };
    }

    /** Character offset of a 1-based line and column (clamped to the document). */
    offset(line, column) {
      const lines = this.lines || this.ta.value.split("\n");
      const l = Math.min(Math.max(1, line), lines.length);
      let off = 0;
      for (let k = 0; k < l - 1; k++) off += lines[k].length + 1;
      return off + Math.min(Math.max(0, column - 1), lines[l - 1].length);
    }

    _updateCaret() {
      const { line, column } = this.position(this.ta.selectionStart);
      this.pos.textContent = `Ln ${line}, Col ${column}`;
      this.active.style.top = `${this.padY + (line - 1) * this.lineH}px`;
      const ln = this.gutterInner.children[line - 1];
      if (this._currentLn !== ln) {
        if (this._currentLn) this._currentLn.classList.remove("is-current");
        if (ln) ln.classList.add("is-current");
        this._currentLn = ln;
      }
    }

    /** Put the caret at (line, column), select `length` characters, and scroll it into view. */
    goTo(line, column, length) {
      const start = this.offset(line, column || 1);
      this.ta.focus();
      this.ta.setSelectionRange(start, start + (length > 0 ? length : 0));
      const top = this.padY + (Math.max(1, line) - 1) * this.lineH;
      const h = this.ta.clientHeight;
      if (top < this.ta.scrollTop || top + this.lineH > this.ta.scrollTop + h) {
        this.ta.scrollTop = Math.max(0, top - h / 3);
      }
      const left = this.padX + visualColumn(this.lines[Math.max(1, line) - 1] || "", column - 1) * this.charW;
      if (left < this.ta.scrollLeft || left > this.ta.scrollLeft + this.ta.clientWidth - 40) {
        this.ta.scrollLeft = Math.max(0, left - this.ta.clientWidth / 2);
      }
      this._syncScroll();
      this._updateCaret();
    }

    // -- markers -------------------------------------------------------------------------------
    /** Show problems: [{line, column, message, severity: error|warning|info, endColumn?, source?}]. */
    setMarkers(list) {
      const clean = [];
      for (const m of Array.isArray(list) ? list : []) {
        const line = parseInt(m && m.line, 10);
        if (!(line >= 1)) {
          console.warn("cel-editor: marker without a valid line ignored", m);
          continue;
        }
        const column = Math.max(1, parseInt(m.column, 10) || 1);
        const endColumn = parseInt(m.endColumn, 10);
        clean.push({
          line,
          column,
          endColumn: endColumn > column ? endColumn : null,
          message: String(m.message ?? "problem"),
          severity: SEVERITY_RANK[m.severity] ? m.severity : "error",
          source: m.source ? String(m.source) : "",
        });
      }
      clean.sort((a, b) => a.line - b.line || a.column - b.column);
      this.markers = clean;
      this.render();
      this._decorateGutter();
      this._renderProblems();
    }

    _markersByLine(lines) {
      const map = new Map();
      if (!this.markers) return map;
      for (const m of this.markers) {
        const line = Math.min(m.line, lines.length);
        const text = lines[line - 1];
        const start = m.line > lines.length ? text.length : Math.min(m.column - 1, text.length);
        const end = m.endColumn ? m.endColumn - 1 : markerEnd(text, start);
        m.start = start;
        m.end = Math.max(end, start + 1);
        m.shownLine = line;
        if (!map.has(line)) map.set(line, []);
        map.get(line).push(m);
      }
      return map;
    }

    _decorateGutter() {
      for (const ln of this.gutterInner.querySelectorAll("[data-severity]")) {
        ln.removeAttribute("data-severity");
        ln.removeAttribute("title");
      }
      if (!this.markers) return;
      const byLine = new Map();
      for (const m of this.markers) {
        const line = m.shownLine || m.line;
        const prev = byLine.get(line);
        if (!prev || SEVERITY_RANK[m.severity] > SEVERITY_RANK[prev.severity]) byLine.set(line, { severity: m.severity, messages: prev ? prev.messages : [] });
        byLine.get(line).messages.push(m.message);
      }
      for (const [line, info] of byLine) {
        const ln = this.gutterInner.children[line - 1];
        if (!ln) continue;
        ln.dataset.severity = info.severity;
        ln.title = info.messages.join("\n");
      }
    }

    _renderProblems() {
      const ms = this.markers || [];
      const count = (s) => ms.filter((m) => m.severity === s).length;
      const errors = count("error");
      const warnings = count("warning");
      const infos = count("info");
      const parts = [];
      if (errors) parts.push(`<span class="ce-count--error">${errors} error${errors > 1 ? "s" : ""}</span>`);
      if (warnings) parts.push(`<span class="ce-count--warning">${warnings} warning${warnings > 1 ? "s" : ""}</span>`);
      if (infos) parts.push(`<span>${infos} note${infos > 1 ? "s" : ""}</span>`);
      if (this.markers && !ms.length) parts.push('<span class="ce-count--ok">\u2713 No problems</span>');
      this.counts.innerHTML = parts.join(" \u00b7 ");
      this.problems.hidden = !ms.length;
      this.problems.innerHTML = "";
      for (const m of ms) {
        const li = el("li");
        const b = el("button", "ce-problem", { type: "button" });
        b.dataset.line = String(m.shownLine || m.line);
        b.dataset.column = String(m.start + 1);
        b.dataset.length = String(Math.max(0, Math.min(m.end, (this.lines[(m.shownLine || m.line) - 1] || "").length) - m.start));
        const icon = el("span", `sev-icon sev-icon--${m.severity}`, { "aria-hidden": "true" });
        icon.textContent = SEVERITY_GLYPH[m.severity];
        const sr = el("span", "sr-only");
        sr.textContent = m.severity + ": ";
        const text = el("span");
        const msg = el("span", "ce-problem-message");
        msg.textContent = m.message;
        text.append(sr, msg);
        if (m.source) {
          const src = el("span", "ce-problem-source");
          src.textContent = m.source;
          text.append(" ", src);
        }
        const pos = el("span", "ce-problem-pos");
        pos.textContent = `Ln ${m.line}, Col ${m.column}`;
        text.append(" ", pos);
        b.append(icon, text);
        li.appendChild(b);
        this.problems.appendChild(li);
      }
    }

    _onHover(e) {
      if (!this.markers || !this.markers.length) return;
      const rect = this.ta.getBoundingClientRect();
      const x = e.clientX - rect.left + this.ta.scrollLeft - this.padX;
      const y = e.clientY - rect.top + this.ta.scrollTop - this.padY;
      const line = Math.floor(y / this.lineH) + 1;
      const text = (this.lines || [])[line - 1];
      if (text === undefined || x < 0) {
        this.tooltip.hidden = true;
        return;
      }
      const off = offsetAtVisual(text, Math.floor(x / this.charW));
      const hits = this.markers.filter((m) => (m.shownLine || m.line) === line && off >= m.start && off < m.end);
      if (!hits.length) {
        this.tooltip.hidden = true;
        return;
      }
      const key = hits.map((m) => m.message).join("\n");
      if (this.tooltip.hidden || this.tooltip.dataset.key !== key) {
        this.tooltip.innerHTML = "";
        for (const m of hits) {
          const row = el("div", "ce-tooltip-item");
          const icon = el("span", `sev-icon sev-icon--${m.severity}`, { "aria-hidden": "true" });
          icon.textContent = SEVERITY_GLYPH[m.severity];
          const msg = el("span");
          msg.textContent = m.message;
          row.append(icon, msg);
          this.tooltip.appendChild(row);
        }
        this.tooltip.dataset.key = key;
        const m = hits[0];
        const left = this.padX + visualColumn(text, m.start) * this.charW - this.ta.scrollLeft;
        const top = this.padY + line * this.lineH - this.ta.scrollTop + 4;
        this.tooltip.hidden = false;
        const maxLeft = this.code.clientWidth - this.tooltip.offsetWidth - 8;
        this.tooltip.style.left = `${Math.max(4, Math.min(left, maxLeft))}px`;
        const below = top + this.tooltip.offsetHeight < this.code.clientHeight;
        this.tooltip.style.top = `${below ? top : top - this.lineH - this.tooltip.offsetHeight - 8}px`;
      }
    }

    // -- completion ----------------------------------------------------------------------------
    /** Fields offered after `pod.`, `node.`, `variables.`, `cluster.` and on resource maps. */
    setCompletions(schema) {
      this.completions = schema && typeof schema === "object" ? schema : {};
      if (this.comp) this.updateCompletion(this.comp.manual);
    }

    _declaredVariables() {
      // Variables declared in this document (`variables:` then `- name: x` / `expression: ...`).
      const found = [];
      let inSection = false;
      let current = null;
      for (const line of this.lines || []) {
        const top = /^([A-Za-z_]\w*)\s*:/.exec(line);
        if (top) {
          inSection = top[1] === "variables";
          current = null;
          continue;
        }
        if (!inSection) continue;
        const name = /^\s*-\s+name\s*:\s*["']?([A-Za-z_]\w*)/.exec(line);
        if (name) {
          current = { name: name[1], type: "variable", kind: "variable", doc: "declared in this policy" };
          found.push(current);
          continue;
        }
        const expr = /^\s*(?:-\s+)?expression\s*:\s*(.+)$/.exec(line);
        if (expr && current && current.doc === "declared in this policy") current.doc = `= ${expr[1].trim()}`;
      }
      return found;
    }

    _entries(list) {
      return (Array.isArray(list) ? list : []).filter((e) => e && e.name);
    }

    _membersOfType(type) {
      if (!type) return null;
      const types = this.completions.types || {};
      if (types[type]) return this._entries(types[type]);
      if (/^resources$/i.test(type)) return this._entries(this.completions.resources);
      const base = String(type).split("(")[0];
      if (types[base]) return this._entries(types[base]);
      return null;
    }

    /** The members after `chain` (names, each with the count of `[...]` indexes after it):
     *  `node.labels["zone"].` is [["node", 0], ["labels", 1]], a string: string methods. */
    _members(chain) {
      const [root, rootIndexes] = chain[0];
      if (!ROOTS.has(root) || rootIndexes) return null;
      let list;
      if (root === "variables") {
        const declared = this._declaredVariables();
        const names = new Set(declared.map((v) => v.name));
        list = declared.concat(this._entries(this.completions.variables).filter((v) => !names.has(v.name)));
      } else {
        list = this._entries(this.completions[root]);
      }
      for (const [seg, indexes] of chain.slice(1)) {
        const entry = list.find((e) => e.name === seg);
        if (!entry) return null;
        let type = entry.type;
        for (let i = 0; i < indexes && type; i++) type = elementType(type);
        list = this._membersOfType(type);
        if (!list) return null;
      }
      return list;
    }

    _topLevel() {
      const roots = [
        { name: "pod", type: "Pod", kind: "root", doc: "the pod being scheduled" },
        { name: "node", type: "Node", kind: "root", doc: "the candidate node" },
        { name: "variables", type: "Variables", kind: "root", doc: "this policy's variables" },
        { name: "cluster", type: "Cluster", kind: "root", doc: "cluster-wide helpers (pod counts)" },
      ];
      return roots.concat(this._entries(this.completions.functions));
    }

    /** Whether offset `at` (the character before the caret) is CEL code, not a string or comment. */
    _inCel(lineIndex, col) {
      const line = this.lines[lineIndex];
      const state = (this.states && this.states[lineIndex]) || "";
      const { tokens } = this._tokenize(line, state);
      let pos = 0;
      for (const t of tokens) {
        if (col < pos + t.t.length) return t.cel && t.c !== "tok-str" && t.c !== "tok-comment";
        pos += t.t.length;
      }
      const last = tokens[tokens.length - 1];
      return !!last && last.cel && last.c !== "tok-str" && last.c !== "tok-comment";
    }

    /** Open, refine or close the completion list for the text before the caret. */
    updateCompletion(manual) {
      const ta = this.ta;
      const caret = ta.selectionStart;
      if (caret !== ta.selectionEnd) return this.closeCompletion();
      const v = ta.value;
      const lineStart = v.lastIndexOf("\n", caret - 1) + 1;
      const before = v.slice(lineStart, caret);
      const lineIndex = this.position(caret).line - 1;
      const m = CHAIN.exec(before);
      const literal = STRING_DOT.exec(before);
      let items = null;
      let partial = "";
      if (m && this._inCel(lineIndex, before.length - m[2].length - 1)) {
        const chain = [...m[1].matchAll(SEGMENT)].map((g) => [g[1], (g[2].match(/\[/g) || []).length]);
        items = this._members(chain);
        partial = m[2];
      } else if (literal && this._inCel(lineIndex, before.length - literal[1].length - 1)) {
        items = this._membersOfType("string"); // "text". offers the string methods
        partial = literal[1];
      } else if (manual || (this.comp && this.comp.manual)) {
        const w = /(?<![\w.])([A-Za-z_]\w*)?$/.exec(before);
        const at = before.length - (w && w[1] ? w[1].length : 0);
        // only inside a CEL expression: never on a YAML key (a line's first word, `- name`)
        if (this._inCel(lineIndex, at - 1) || this._inCel(lineIndex, at)) {
          items = this._topLevel();
          partial = (w && w[1]) || "";
          manual = true;
        }
      }
      if (!items || !items.length) return this.closeCompletion();
      const p = partial.toLowerCase();
      const prefix = items.filter((e) => e.name.toLowerCase().startsWith(p));
      const inner = p ? items.filter((e) => !e.name.toLowerCase().startsWith(p) && e.name.toLowerCase().includes(p)) : [];
      const shown = prefix.concat(inner);
      if (!shown.length || (shown.length === 1 && shown[0].name === partial && !manual)) return this.closeCompletion();
      const keepIndex = this.comp && this.comp.items[this.comp.index] ? this.comp.items[this.comp.index].name : null;
      let index = keepIndex ? shown.findIndex((e) => e.name === keepIndex) : 0;
      if (index < 0 || p) index = 0;
      this.comp = { items: shown, index, from: caret - partial.length, partial, manual: !!manual };
      this._renderCompletion();
    }

    _kindGlyph(e) {
      const kind = e.kind || (/\(/.test(e.type || "") ? "function" : "field");
      return { field: "f", function: "m", macro: "m", variable: "v", root: "o", resource: "r" }[kind] || "f";
    }

    _renderCompletion() {
      const c = this.comp;
      const list = this.list;
      list.innerHTML = "";
      c.items.forEach((e, i) => {
        const li = el("li", "ce-option", { role: "option", id: `${this.id}-opt-${i}`, "aria-selected": String(i === c.index) });
        li.dataset.index = String(i);
        const kind = el("span", "ce-option-kind", { "aria-hidden": "true" });
        kind.textContent = this._kindGlyph(e);
        const name = el("span", "ce-option-name");
        const n = c.partial.length;
        if (n && e.name.toLowerCase().startsWith(c.partial.toLowerCase())) {
          const mark = el("mark");
          mark.textContent = e.name.slice(0, n);
          name.append(mark, e.name.slice(n));
        } else {
          name.textContent = e.name;
        }
        const type = el("span", "ce-option-type");
        type.textContent = e.type || "";
        li.append(kind, name, type);
        list.appendChild(li);
      });
      const sel = c.items[c.index];
      this.doc.textContent = sel && sel.doc ? sel.doc : "";
      this.doc.hidden = !(sel && sel.doc);
      this.complete.hidden = false;
      this.ta.setAttribute("aria-activedescendant", `${this.id}-opt-${c.index}`);
      const active = list.children[c.index];
      if (active) active.scrollIntoView({ block: "nearest" });
      this._positionCompletion();
    }

    _positionCompletion() {
      const c = this.comp;
      if (!c) return;
      const { line, column } = this.position(c.from);
      const text = this.lines[line - 1] || "";
      const x = this.padX + visualColumn(text, column - 1) * this.charW - this.ta.scrollLeft - 28;
      const yBelow = this.padY + line * this.lineH - this.ta.scrollTop + 2;
      const box = this.complete;
      const h = box.offsetHeight;
      const room = this.code.clientHeight;
      const top = yBelow + h > room && yBelow - this.lineH - h - 4 > 0 ? yBelow - this.lineH - h - 4 : yBelow;
      box.style.top = `${top}px`;
      box.style.left = `${Math.max(4, Math.min(x, this.code.clientWidth - box.offsetWidth - 4))}px`;
    }

    _moveSelection(delta) {
      const c = this.comp;
      const n = c.items.length;
      c.index = delta === Infinity ? n - 1 : delta === -Infinity ? 0 : (c.index + delta + n) % n;
      this._renderCompletion();
    }

    closeCompletion() {
      if (!this.comp && this.complete.hidden) return;
      this.comp = null;
      this.complete.hidden = true;
      this.ta.removeAttribute("aria-activedescendant");
    }

    /** Insert item `index`, replacing the partial word (and the rest of the word after the caret). */
    acceptCompletion(index) {
      const c = this.comp;
      if (!c) return;
      const item = c.items[index ?? c.index];
      if (!item) return;
      const v = this.ta.value;
      let to = this.ta.selectionStart;
      while (to < v.length && /\w/.test(v[to])) to++;
      const fn = item.kind === "function" || item.kind === "macro";
      const text = item.insert || (fn ? `${item.name}()` : item.name);
      const caretAt = c.from + (fn && !item.insert ? text.length - 1 : text.length);
      this.closeCompletion();
      this._replace(c.from, to, text, caretAt);
    }

    /** Replace [start, end) with `text` keeping the browser's undo history when it can. */
    _replace(start, end, text, caret, caretEnd) {
      const ta = this.ta;
      this._inserting = true;
      try {
        ta.focus();
        ta.setSelectionRange(start, end);
        let ok = false;
        try {
          ok = document.execCommand("insertText", false, text);
        } catch (err) {
          ok = false;
        }
        if (!ok || ta.value.slice(start, start + text.length) !== text) {
          ta.setRangeText(text, start, end, "end");
          this._onInput();
        }
        const at = caret ?? start + text.length;
        ta.setSelectionRange(at, caretEnd ?? at);
      } finally {
        this._inserting = false;
      }
      this._updateCaret();
    }

    // -- keys ----------------------------------------------------------------------------------
    _onKeyDown(e) {
      const ta = this.ta;
      const mod = e.ctrlKey || e.metaKey;
      if (this.comp) {
        const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: 8, PageUp: -8 };
        if (e.key in moves && !mod && !e.altKey) {
          e.preventDefault();
          this._moveSelection(moves[e.key]);
          return;
        }
        if ((e.key === "Enter" && !mod && !e.shiftKey) || (e.key === "Tab" && !e.shiftKey)) {
          e.preventDefault();
          this.acceptCompletion();
          return;
        }
        if (e.key === "Escape") {
          e.preventDefault();
          this.closeCompletion();
          return;
        }
        if (e.key === "ArrowLeft" || e.key === "ArrowRight" || e.key === "Home" || e.key === "End") this.closeCompletion();
      }
      if (mod && e.key === "Enter") {
        e.preventDefault();
        clearTimeout(this._debounce);
        this._emit("cel-editor:preview");
        return;
      }
      if (mod && (e.key === " " || e.code === "Space")) {
        e.preventDefault();
        this.updateCompletion(true);
        return;
      }
      if (e.key === "Escape") {
        this.tooltip.hidden = true;
        this.tabLeaves = true;
        return;
      }
      if (e.key === "Tab" && !mod && !e.altKey) {
        if (this.tabLeaves) {
          this.tabLeaves = false;
          return; // let the browser move focus
        }
        e.preventDefault();
        this._indent(e.shiftKey);
        return;
      }
      this.tabLeaves = false;
      if (e.key === "Enter" && !mod && !e.shiftKey && !e.altKey && !e.isComposing) {
        e.preventDefault();
        this._newline();
      }
    }

    /** Tab: two spaces at the caret, or indent every selected line; Shift+Tab: dedent lines. */
    _indent(outdent) {
      const ta = this.ta;
      const v = ta.value;
      const s = ta.selectionStart;
      const e = ta.selectionEnd;
      const multi = v.slice(s, e).includes("\n");
      if (!outdent && !multi) {
        this._replace(s, e, TAB);
        return;
      }
      const from = v.lastIndexOf("\n", s - 1) + 1;
      const endLine = v.indexOf("\n", e > s && v[e - 1] === "\n" ? e - 1 : e);
      const to = endLine === -1 ? v.length : endLine;
      const lines = v.slice(from, to).split("\n");
      let firstDelta = 0;
      let total = 0;
      const changed = lines.map((line, k) => {
        if (outdent) {
          const cut = Math.min(TAB.length, line.length - line.trimStart().length);
          if (k === 0) firstDelta = -Math.min(cut, s - from);
          total -= cut;
          return line.slice(cut);
        }
        if (k === 0) firstDelta = TAB.length;
        total += TAB.length;
        return TAB + line;
      });
      const text = changed.join("\n");
      if (text === lines.join("\n")) return;
      if (multi) this._replace(from, to, text, from, from + text.length);
      else this._replace(from, to, text, Math.max(from, s + firstDelta), Math.max(from, e + total));
    }

    /** Enter keeps the line's indentation, and adds a level after `key:` (or a block `|`). */
    _newline() {
      const ta = this.ta;
      const v = ta.value;
      const s = ta.selectionStart;
      const lineStart = v.lastIndexOf("\n", s - 1) + 1;
      const before = v.slice(lineStart, s);
      let indent = /^\s*/.exec(before)[0];
      const item = /^(\s*)-\s+(?=\S)/.exec(before);
      if (item) indent = " ".repeat(item[0].length);
      const code = before.replace(/\s+#.*$/, "").trimEnd();
      if (/:$/.test(code) || /:\s*[|>][-+0-9]*$/.test(code)) indent += TAB;
      this._replace(s, ta.selectionEnd, "\n" + indent);
    }

    destroy() {
      document.removeEventListener("selectionchange", this._onSelection);
      this.root.parentNode.insertBefore(this.ta, this.root);
      this.root.remove();
      this.ta.classList.remove("ce-input");
      instances.delete(this.ta);
      delete this.ta.celEditor;
    }
  }

  // ------------------------------------------------------------------------------------------
  // Auto-initialisation and markers from swapped-in HTML
  // ------------------------------------------------------------------------------------------
  function applyMarkerScripts(scope) {
    const sel = 'script[type="application/json"][data-cel-markers-for]';
    const found = Array.from(scope.querySelectorAll ? scope.querySelectorAll(sel) : []);
    if (scope.matches && scope.matches(sel)) found.push(scope);
    for (const script of found) {
      const ta = document.getElementById(script.dataset.celMarkersFor);
      const editor = ta && instances.get(ta);
      if (!editor) continue;
      const rev = script.dataset.revision;
      if (rev !== undefined && rev !== "" && Number(rev) < editor.revision) continue; // stale answer
      try {
        editor.setMarkers(JSON.parse(script.textContent));
      } catch (err) {
        console.warn("cel-editor: invalid markers JSON", err);
      }
    }
  }

  function initAll(scope) {
    const root = scope && scope.querySelectorAll ? scope : document;
    const found = Array.from(root.querySelectorAll("textarea[data-cel-editor]"));
    if (root.matches && root.matches("textarea[data-cel-editor]")) found.push(root);
    for (const ta of found) if (!instances.has(ta)) new CelEditor(ta);
    applyMarkerScripts(root);
  }

  document.addEventListener("htmx:load", (e) => initAll(e.detail.elt));
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => initAll(document));
  else initAll(document);

  window.CelEditor = {
    attach: (textarea, options) => instances.get(textarea) || new CelEditor(textarea, options),
    get: (textarea) => instances.get(typeof textarea === "string" ? document.querySelector(textarea) : textarea) || null,
    initAll,
    tokenizeLine: (line, state = "", celKeys = CEL_KEYS) => tokenizeLine(line, state, celKeys),
  };
})();
