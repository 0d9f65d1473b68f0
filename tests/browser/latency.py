"""Keystroke-to-table latency in the playground, measured in the page: shared by the browser test
(which only catches breakage) and `make bench` (which holds the 300 ms target).

The clock starts at the editor's last `input` event and stops when the preview result carrying the
edit's revision is in the page (a MutationObserver on the preview panel): debounce, request,
server, transfer and the swap are all inside. No Django import: the bench drives a server started
as `make run` starts it.
"""

from __future__ import annotations

_INSTRUMENT = """() => {
  const ta = document.querySelector('#policy-editor');
  ta.addEventListener('input', () => { window.__lastInput = performance.now(); });
  window.__swapped = {};
  new MutationObserver(() => {
    const r = document.querySelector('#preview-result');
    if (r && !(r.dataset.revision in window.__swapped)) window.__swapped[r.dataset.revision] = performance.now();
  }).observe(document.querySelector('#panel-preview'), {childList: true, subtree: true});
}"""

# Selects the value after the first "weight: " in the editor (the line's end), as a user would.
_GO_TO_WEIGHT = """() => {
  const ed = CelEditor.get('#policy-editor');
  const text = ed.getValue();
  const at = text.indexOf('weight: ');
  const line = text.slice(0, at).split('\\n').length;
  const column = at - text.lastIndexOf('\\n', at - 1);
  ed.goTo(line, column, 8);
}"""


def playground_ready(page) -> None:
    """The playground's scripts are initialised and its first result is on the page."""
    page.wait_for_function("window.CelEditor && window.playground && window.htmx")
    page.wait_for_function("!!CelEditor.get('#policy-editor')")
    page.wait_for_selector("#preview-result[data-state]")


def keystroke_latencies(page, *, edits: int = 10) -> list[float]:
    """Milliseconds from the last keystroke to the new table, one per edit of the first weight
    (the playground must be open on a policy with a `weight:` and ready)."""
    page.evaluate(_INSTRUMENT)
    samples = []
    for i in range(edits):
        page.evaluate(_GO_TO_WEIGHT)
        page.keyboard.press("End")
        page.keyboard.press("Backspace")
        page.keyboard.type("3456789"[i % 7])
        rev = page.evaluate("CelEditor.get('#policy-editor').revision")
        page.wait_for_function(f"window.__swapped['{rev}'] !== undefined")
        samples.append(page.evaluate(f"window.__swapped['{rev}'] - window.__lastInput"))
        # the next edit starts once this one's answer has settled (markers, drill-down)
        page.wait_for_function(f"playground.settledRevision === '{rev}'")
    return samples
