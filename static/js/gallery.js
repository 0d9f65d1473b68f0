// The DEBUG component gallery's wiring (templates/_dev/components.html): a file, for the CSP.
// Gallery-only wiring: demo toast buttons and a log of the editor's events.
document.addEventListener("click", (e) => {
  const b = e.target.closest("[data-demo-toast]");
  if (!b) return;
  const kind = b.dataset.demoToast;
  const text = {
    success: "Published gpu-packing v8; extenders switched in 0.8 s.",
    info: "Snapshot refreshed: 12 nodes, 412 pods.",
    warning: "Snapshot is 45 s old; previews may be out of date.",
    error: "Publish failed: test case 'gpu-pod-lands-on-busy-node' expected pass on gpu-a100-01, got reject.",
  }[kind];
  window.schedweb.toast(text, { kind });
});
const log = [];
for (const name of ["cel-editor:change", "cel-editor:preview"]) {
  document.addEventListener(name, (e) => {
    log.unshift(`${name.split(":")[1]} r${e.detail.revision}`);
    document.getElementById("editor-events").textContent = log.slice(0, 3).join(" · ");
  });
}
// The demo form submits nowhere.
document.addEventListener("submit", (e) => {
  if (e.target.matches("[data-demo-form]")) e.preventDefault();
});
