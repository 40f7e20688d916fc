// dataservice web console: small progressive enhancements. Every page works without it.
(function () {
  "use strict";

  // A select marked data-autosubmit submits its form when changed.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });

  // "+ another value" on a multi-valued field copies its last input, empty.
  document.querySelectorAll("button[data-more]").forEach(function (b) {
    b.addEventListener("click", function () {
      var inputs = b.parentNode.querySelectorAll("input:not([type=hidden]), select, textarea");
      if (!inputs.length) { return; }
      var last = inputs[inputs.length - 1];
      var copy = last.cloneNode(true);
      copy.value = "";
      copy.id = last.id.replace(/_\d+$/, "") + "_" + inputs.length;
      last.parentNode.insertBefore(copy, last.nextSibling);
      bindLookup(copy);
      copy.focus();
    });
  });

  // Reference fields: fill their datalist from the console's lookup endpoint as the user types.
  function bindLookup(input) {
    var url = input.getAttribute("data-lookup");
    var list = input.list;
    if (!url || !list) { return; }
    var timer = null;
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        fetch(url + "&q=" + encodeURIComponent(input.value), { credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.json() : []; })
          .then(function (items) {
            list.textContent = "";
            items.forEach(function (it) {
              var o = document.createElement("option");
              o.value = it.keyname;
              if (it.displayname) { o.label = it.displayname; }
              list.appendChild(o);
            });
          })
          .catch(function () {});
      }, 200);
    });
  }
  document.querySelectorAll("input[data-lookup]").forEach(bindLookup);

  // Narrow screens: the sidebar hides behind the menu button (the stylesheet hides it
  // only on pages this script runs on, so without it the sidebar stays in view).
  document.documentElement.classList.add("js");
  var menu = document.getElementById("menu");
  var sidebar = document.getElementById("sidebar");
  if (menu && sidebar) {
    menu.hidden = false;
    menu.addEventListener("click", function () {
      var open = document.body.classList.toggle("nav-open");
      menu.setAttribute("aria-expanded", open ? "true" : "false");
      if (open) {
        var first = sidebar.querySelector("a");
        if (first) { first.focus(); }
      }
    });
  }

  // Keyboard shortcuts, never while typing in a field: "/" focuses the search box,
  // "g" then "d" opens the dashboard, "?" shows their list, Escape closes it.
  var shortcuts = [
    ["/", "Focus the search box"],
    ["g d", "Go to the dashboard"],
    ["?", "Show or hide this list"],
    ["Esc", "Close this list, or the menu"]
  ];
  var help = null;
  function toggleHelp(show) {
    if (!help) {
      help = document.createElement("div");
      help.id = "shortcuts";
      help.className = "overlay";
      help.setAttribute("role", "dialog");
      help.setAttribute("aria-modal", "true");
      help.setAttribute("aria-labelledby", "shortcuts-title");
      var box = document.createElement("div");
      box.className = "card";
      var h = document.createElement("h2");
      h.id = "shortcuts-title";
      h.textContent = "Keyboard shortcuts";
      box.appendChild(h);
      var dl = document.createElement("dl");
      shortcuts.forEach(function (s) {
        var dt = document.createElement("dt");
        s[0].split(" ").forEach(function (k, i) {
          if (i) { dt.appendChild(document.createTextNode(" then ")); }
          var kbd = document.createElement("kbd");
          kbd.textContent = k;
          dt.appendChild(kbd);
        });
        var dd = document.createElement("dd");
        dd.textContent = s[1];
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      box.appendChild(dl);
      var close = document.createElement("button");
      close.type = "button";
      close.id = "shortcuts-close";
      close.textContent = "Close";
      close.addEventListener("click", function () { toggleHelp(false); });
      box.appendChild(close);
      help.appendChild(box);
      help.addEventListener("click", function (e) { if (e.target === help) { toggleHelp(false); } });
      document.body.appendChild(help);
    }
    help.hidden = !show;
    if (show) { help.querySelector("button").focus(); }
  }
  function typing(el) {
    if (!el || el === document.body) { return false; }
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }
  var pendingG = 0;
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") {
      if (help && !help.hidden) { toggleHelp(false); e.preventDefault(); return; }
      if (document.body.classList.contains("nav-open") && menu) { menu.click(); menu.focus(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented || typing(e.target)) { return; }
    var g = pendingG && Date.now() - pendingG < 1500;
    pendingG = 0;
    if (e.key === "?") {
      e.preventDefault();
      toggleHelp(!help || help.hidden);
    } else if (e.key === "/") {
      var search = document.querySelector("input[type=search]");
      if (search) { e.preventDefault(); search.focus(); search.select(); }
    } else if (e.key === "g") {
      pendingG = Date.now();
    } else if (e.key === "d" && g) {
      e.preventDefault();
      window.location.assign("/");
    }
  });

})();
