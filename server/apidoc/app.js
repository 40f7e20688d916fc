// Renders /api/openapi.json as a reference page. Our own code: no libraries. All text is
// inserted with textContent, never as HTML.
"use strict";

(function () {
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }

  // resolve follows a local "$ref" ("#/components/...") in doc.
  function resolve(doc, v) {
    var seen = 0;
    while (v && typeof v === "object" && typeof v.$ref === "string" && seen++ < 10) {
      var parts = v.$ref.replace(/^#\//, "").split("/");
      v = parts.reduce(function (o, p) {
        return o ? o[p.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
      }, doc);
    }
    return v || {};
  }

  function typeText(schema) {
    if (!schema) { return ""; }
    var t = Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.type || "");
    if (schema.enum) { t += " (" + schema.enum.join(", ") + ")"; }
    if (schema.default !== undefined) { t += ", default " + schema.default; }
    return t;
  }

  var methods = ["get", "post", "put", "patch", "delete", "head", "options"];

  function render(doc) {
    document.title = doc.info.title + " " + doc.info.version;
    document.getElementById("title").textContent = doc.info.title + " " + doc.info.version;
    var summary = document.getElementById("summary");
    summary.textContent = doc.info.description || doc.info.summary || "";
    summary.className = "desc";
    var byTag = {};
    var order = (doc.tags || []).map(function (t) { return t.name; });
    Object.keys(doc.paths).forEach(function (path) {
      var item = doc.paths[path];
      methods.forEach(function (m) {
        var op = item[m];
        if (!op) { return; }
        var tag = (op.tags && op.tags[0]) || "other";
        if (order.indexOf(tag) < 0) { order.push(tag); }
        (byTag[tag] = byTag[tag] || []).push({ path: path, method: m, op: op, item: item });
      });
    });
    var nav = document.getElementById("nav");
    var main = document.getElementById("ops");
    order.forEach(function (tag) {
      if (!byTag[tag]) { return; }
      nav.appendChild(el("a", { href: "#tag-" + tag }, [tag]));
      var tagInfo = (doc.tags || []).filter(function (t) { return t.name === tag; })[0];
      main.appendChild(el("h2", { id: "tag-" + tag }, [tag]));
      if (tagInfo && tagInfo.description) { main.appendChild(el("p", { class: "muted" }, [tagInfo.description])); }
      byTag[tag].forEach(function (o) { main.appendChild(operation(doc, o)); });
    });
  }

  function operation(doc, o) {
    var op = o.op;
    var cls = o.method === "get" ? "m-get" : (o.method === "post" ? "m-post" : "m-other");
    var box = el("section", { class: "op", id: (op.operationId || o.method + o.path) }, [
      el("h3", {}, [el("span", { class: "m " + cls }, [o.method.toUpperCase()]), o.path]),
      el("p", {}, [op.summary || ""])
    ]);
    if (op.description) { box.appendChild(el("p", { class: "desc" }, [op.description])); }
    var auth = op.security && op.security.length === 0 ? "no credentials" : "credentials: API key (Bearer or X-Service-Key) or Basic login";
    box.appendChild(el("p", { class: "muted" }, [auth]));
    var params = (o.item.parameters || []).concat(op.parameters || []).map(function (p) { return resolve(doc, p); });
    if (params.length) {
      var rows = params.map(function (p) {
        return el("tr", {}, [
          el("td", {}, [el("code", {}, [p.name])]),
          el("td", {}, [p.in + (p.required ? ", required" : "")]),
          el("td", {}, [typeText(resolve(doc, p.schema))]),
          el("td", {}, [p.description || ""])
        ]);
      });
      box.appendChild(el("table", {}, [el("tr", {}, [el("th", {}, ["parameter"]), el("th", {}, ["in"]),
        el("th", {}, ["type"]), el("th", {}, ["meaning"])])].concat(rows)));
    }
    if (op.requestBody) {
      var rb = resolve(doc, op.requestBody);
      box.appendChild(el("p", {}, ["Body: " + Object.keys(rb.content || {}).join(", ") +
        (rb.description ? " — " + rb.description : "")]));
    }
    var codes = Object.keys(op.responses || {}).sort();
    var rrows = codes.map(function (code) {
      var r = resolve(doc, op.responses[code]);
      var types = Object.keys(r.content || {}).join(", ");
      return el("tr", {}, [el("td", {}, [el("code", {}, [code])]), el("td", {}, [r.description || ""]),
        el("td", { class: "muted" }, [types])]);
    });
    box.appendChild(el("table", {}, [el("tr", {}, [el("th", {}, ["status"]), el("th", {}, ["reply"]),
      el("th", {}, ["content"])])].concat(rrows)));
    return box;
  }

  fetch("../openapi.json", { headers: { Accept: "application/json" } })
    .then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.json();
    })
    .then(render)
    .catch(function (err) {
      document.getElementById("summary").textContent = "Could not load /api/openapi.json: " + err.message;
    });
})();
