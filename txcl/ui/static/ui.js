// txcl dashboard: refresh the part of a page marked data-refresh="<ms>" from ?fragment=1,
// until the fragment says there is nothing more to watch (an element with data-stop).
(function () {
  "use strict";
  // the Cancel and Retry buttons of a run page (also inside refreshed parts: one listener)
  document.addEventListener("click", function (event) {
    var copy = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (copy) {  // "Copy the launch configuration" and the like: the text of the element named
      var source = document.getElementById(copy.getAttribute("data-copy"));
      if (source && navigator.clipboard) {
        navigator.clipboard.writeText(source.textContent).then(function () { copy.textContent = "Copied"; });
      }
      return;
    }
    var retry = event.target.closest ? event.target.closest("[data-retry]") : null;
    if (retry) {
      if (!window.confirm("Retry this run? Its calls without an answer are sent again.")) { return; }
      retry.disabled = true;
      fetch(retry.getAttribute("data-retry"), {
        method: "POST", credentials: "same-origin", headers: { "X-Txcl-UI": "1" }
      }).then(function (res) { return res.json().then(function (body) { return [res.ok, body]; }); })
        .then(function (got) {
          if (!got[0]) { window.alert("Not retried: " + (got[1].reason || got[1].status)); retry.disabled = false; return; }
          window.location.reload();
        });
      return;
    }
    var button = event.target.closest ? event.target.closest("[data-cancel]") : null;
    if (!button) { return; }
    var reason = window.prompt("Cancel this run? Give a reason (kept in its error):", "");
    if (reason === null) { return; }
    button.disabled = true;
    fetch(button.getAttribute("data-cancel"), {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Txcl-UI": "1" },
      body: JSON.stringify({ reason: reason })
    }).then(function () { window.location.reload(); });
  });
  var live = document.querySelector("[data-refresh]");
  if (!live) { return; }
  var every = parseInt(live.getAttribute("data-refresh"), 10) || 2000;
  function fragmentUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    return url.toString();
  }
  function tick() {
    if (document.hidden) { window.setTimeout(tick, every); return; }
    fetch(fragmentUrl(), { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (res) { if (!res.ok) { throw new Error(res.status); } return res.text(); })
      .then(function (html) {
        var open = Array.prototype.map.call(live.querySelectorAll("details[open]"), function (d) {
          return d.querySelector("summary") ? d.querySelector("summary").textContent : "";
        });
        live.innerHTML = html;
        Array.prototype.forEach.call(live.querySelectorAll("details"), function (d) {
          var s = d.querySelector("summary");
          if (s && open.indexOf(s.textContent) >= 0) { d.open = true; }
        });
        live.setAttribute("data-updated", String(Date.now()));
        if (!live.querySelector("[data-stop]")) { window.setTimeout(tick, every); }
      })
      .catch(function () { window.setTimeout(tick, every * 2); });
  }
  window.setTimeout(tick, every);
})();
