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

})();
