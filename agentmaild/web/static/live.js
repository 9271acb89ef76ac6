/* agentmaild dashboard: live fragments over server-sent events (no build step, no framework).
 * <body data-live="/events?topic=…"> opens one EventSource; each element with data-sse="NAME"
 * has its contents replaced by the server-rendered (already escaped) HTML of event NAME.
 * A dropped or broken stream is reopened by the browser (the server sends "retry: 1000"). */
(function () {
  "use strict";
  var url = document.body.getAttribute("data-live");
  if (!url || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  function show(text, cls) {
    if (status) { status.textContent = text; status.className = "live " + cls; }
  }
  var source = new EventSource(url);
  source.onopen = function () { show("live", "on"); };
  source.onerror = function () { show("reconnecting…", "off"); };
  var targets = document.querySelectorAll("[data-sse]");
  Array.prototype.forEach.call(targets, function (el) {
    source.addEventListener(el.getAttribute("data-sse"), function (event) {
      el.innerHTML = event.data;
      if (window.htmx) { window.htmx.process(el); }
      el.setAttribute("data-updates", String(Number(el.getAttribute("data-updates") || 0) + 1));
    });
  });
})();
