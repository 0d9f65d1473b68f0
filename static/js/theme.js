// A pinned theme (light/dark, chosen in the top bar) applied before first paint to avoid a flash.
// Loaded without defer from <head>: a file, not an inline script, so the CSP needs no 'unsafe-inline'.
try {
  var t = localStorage.getItem("schedweb-theme");
  if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
} catch (e) {}
// Swagger UI's page template (/api/docs/) has no block for <html lang>: the app's language then.
if (!document.documentElement.lang) document.documentElement.lang = "en";
