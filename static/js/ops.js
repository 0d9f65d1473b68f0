/* Ops pages' small behaviours (app.js does the rest):
 *   [data-health]   the dashboard's polled health card says when a refresh failed (it opts out of
 *                   app.js's error toasts, which would repeat every 5 s) and keeps the old numbers
 *   #connect-tabs   the selected output tab goes into the options form (hidden `tab`), so the
 *                   server renders it selected again when htmx re-renders, and the URL keeps it
 */
(function () {
  "use strict";

  function noteRefreshFailure(e, why) {
    const card = e.target.closest && e.target.closest("[data-health]");
    if (!card) return;
    const note = card.querySelector("[data-health-note]");
    if (!note) return;
    const at = new Date().toLocaleTimeString();
    note.textContent = `Not refreshed since ${at}: ${why}. Showing the last numbers.`;
  }

  document.addEventListener("htmx:sendError", (e) =>
    noteRefreshFailure(e, "the schedweb server did not answer"),
  );
  document.addEventListener("htmx:responseError", (e) =>
    noteRefreshFailure(e, `the server answered ${e.detail.xhr.status}`),
  );

  document.addEventListener("click", (e) => {
    const tab = e.target.closest && e.target.closest('#connect-tabs [role="tab"]');
    const field = document.getElementById("connect-tab");
    if (!tab || !field) return;
    field.value = tab.id.replace(/^tab-/, "");
    const url = new URL(window.location.href);
    if (url.searchParams.has("tab")) {
      url.searchParams.set("tab", field.value);
      history.replaceState(history.state, "", url);
    }
  });
})();
