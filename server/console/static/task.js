// dataservice web console: the task page's live progress. It polls the task's
// progress endpoint and updates the bar, the figures and the counters in place; when
// the task has finished it reads the page once more for the changes and errors.
// Without it the page refreshes itself while the task runs (<noscript> refresh).
(function () {
  "use strict";
  var root = document.getElementById("task");
  if (!root || root.getAttribute("data-finished") === "true") { return; }
  var url = root.getAttribute("data-progress");
  var doneEl = document.getElementById("done");
  var lastDone = doneEl ? Number(doneEl.textContent.replace(/,/g, "")) : null;

  // grouped writes a count as the server's pages do: a comma between groups of three
  // digits (12,400), whatever the browser's language.
  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function set(id, text) {
    var el = document.getElementById(id);
    if (el) { el.textContent = text; }
  }

  // refresh replaces the elements with these ids by the server's current rendering
  // of the page: the whole task when it has finished, the change sample and the
  // errors after each batch.
  function refresh(ids) {
    fetch(location.pathname, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        ids.forEach(function (id) {
          var fresh = doc.getElementById(id), old = document.getElementById(id);
          if (fresh && old) { old.replaceWith(fresh); }
        });
      })
      .catch(function () {});
  }

  function show(p) {
    var bar = document.getElementById("bar");
    if (bar) { bar.value = p.percent; bar.textContent = p.percent + "%"; }
    set("percent", p.percent + "%");
    set("done", grouped(p.done));
    set("total", grouped(p.total));
    set("rate", p.rate ? p.rate + "/s" : "rate not known yet");
    set("eta", p.eta || (p.finished ? "done" : "—"));
    set("status", p.status);
    var st = document.getElementById("status");
    if (st) { st.className = "status status-" + p.status; }
    Object.keys(p.counters || {}).forEach(function (k) { set("c-" + k, grouped(p.counters[k])); });
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (!r.ok || (r.headers.get("Content-Type") || "").indexOf("application/json") !== 0) { throw new Error("stopped"); }
        return r.json();
      })
      .then(function (p) {
        show(p);
        if (p.finished) { refresh(["task"]); return; }
        if (p.done !== lastDone) { lastDone = p.done; refresh(["changes", "errors"]); }
        setTimeout(poll, 700);
      })
      .catch(function () {
        // Signed out or gone: fall back to reloading now and then.
        setTimeout(function () { location.reload(); }, 5000);
      });
  }
  setTimeout(poll, 300);
})();
