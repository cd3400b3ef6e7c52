// txcl playground: evaluate as you type (debounced), show diagnostics, WHEN per condition,
// the op input and output, and the envelope after the merge.
(function () {
  "use strict";
  var base = document.querySelector('link[rel="stylesheet"]').getAttribute("href").replace(/\/static\/ui\.css$/, "");
  var $ = function (id) { return document.getElementById(id); };
  var rule = $("rule"), envelope = $("envelope"), output = $("output"), hl = $("rule-hl");
  var timer = null, seq = 0;

  function text(el, value) { el.textContent = value === undefined || value === null ? "" : value; }
  function json(value) { return value === undefined ? "" : JSON.stringify(value, null, 2); }
  function mode() { var m = document.querySelector('input[name="mode"]:checked'); return m ? m.value : "rule"; }

  function syncScroll() { hl.scrollTop = rule.scrollTop; hl.scrollLeft = rule.scrollLeft; }

  function showRule(data) {
    hl.innerHTML = (data.highlighted || "") + "\n";
    var list = $("diagnostics");
    list.innerHTML = "";
    (data.diagnostics || []).forEach(function (d) {
      var li = document.createElement("li");
      li.className = "diag " + d.severity;
      var code = document.createElement("code");
      code.className = "code";
      code.textContent = d.code;
      li.appendChild(code);
      li.appendChild(document.createTextNode(" " + d.line + ":" + d.column + " " + d.message + (d.hint ? " — " + d.hint : "")));
      list.appendChild(li);
    });
    text($("input-errors"), (data.input_errors || []).join("; "));
    var verdict = $("when-result");
    if (data.matched === undefined) {
      text(verdict, "—"); verdict.className = "verdict";
    } else {
      text(verdict, data.matched ? "true" : "false");
      verdict.className = "verdict " + (data.matched ? "yes" : "no");
    }
    var conds = $("conditions");
    conds.innerHTML = "";
    (data.conditions || []).forEach(function (c) {
      var li = document.createElement("li");
      li.style.marginLeft = (c.depth * 1.2) + "em";
      li.className = c.value ? "yes" : "no";
      var v = document.createElement("strong");
      v.textContent = c.value ? "true" : "false";
      var t = document.createElement("code");
      t.textContent = c.text;
      li.appendChild(v); li.appendChild(document.createTextNode(" ")); li.appendChild(t);
      conds.appendChild(li);
    });
    text($("exec-target"), data.exec ? "EXEC " + data.exec + " (not run)" : "");
    text($("op-input"), json(data.op_input));
    text($("op-output"), json(data.output));
    text($("op-error"), data.error || "");
    text($("envelope-after"), json(data.envelope));
  }

  function showStack(data) {
    text($("input-errors"), (data.input_errors || []).join("; "));
    var verdict = $("when-result");
    text(verdict, data.status || "—");
    verdict.className = "verdict " + (data.status === "completed" ? "yes" : "no");
    $("conditions").innerHTML = "";
    text($("exec-target"), (data.mocked_calls || []).length + " EXEC(s) mocked");
    text($("op-input"), "");
    text($("op-output"), "");
    text($("op-error"), data.error ? JSON.stringify(data.error) : "");
    text($("envelope-after"), json(data.envelope));
    var steps = $("stack-steps");
    steps.innerHTML = "";
    (data.steps || []).forEach(function (s) {
      var li = document.createElement("li");
      li.textContent = s.stage + " " + s.name + " " + s.transport + " " + s.status + (s.error ? " — " + s.error : "");
      steps.appendChild(li);
    });
  }

  function run() {
    var mine = ++seq;
    var m = mode();
    var url = base + (m === "rule" ? "/playground/rule" : "/playground/stack");
    var body = m === "rule" ? { rule: rule.value, envelope: envelope.value, output: output.value }
                            : { stack: $("stack").value, envelope: envelope.value };
    fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, credentials: "same-origin",
                 body: JSON.stringify(body) })
      .then(function (res) { return res.json(); })
      .then(function (data) {
        if (mine !== seq) { return; }
        if (m === "rule") { showRule(data); } else { showStack(data); }
        document.body.setAttribute("data-evaluated", String(mine));
      });
  }

  function soon() { window.clearTimeout(timer); timer = window.setTimeout(run, 250); }

  // ---- completion of keys in the envelope box, from the chosen stack's schema ($defs.input)
  var schemaPaths = [], suggest = $("envelope-suggest");

  // Each load is numbered: when the stack changes while an earlier answer is still on its way,
  // only the answer for the latest choice may set the paths (answers can arrive out of order).
  var pathsRequest = 0;

  function loadPaths() {
    schemaPaths = [];
    var ticket = ++pathsRequest;
    var select = $("stack");
    if (!select || mode() !== "stack") { hideSuggest(); $("envelope-hint").hidden = true; return; }
    fetch(base + "/playground/paths?stack=" + encodeURIComponent(select.value), { credentials: "same-origin" })
      .then(function (res) { return res.json(); })
      .then(function (data) {
        if (ticket !== pathsRequest) { return; }
        schemaPaths = data.paths || [];
        $("envelope-hint").hidden = !schemaPaths.length;
      });
  }

  // The object path at the caret and the key being typed there, when the caret is inside a
  // key string of an object (else null): a small scan of the JSON text before the caret.
  function keyContext(text) {
    var frames = [], key = null, expectKey = false, i = 0, n = text.length;
    while (i < n) {
      var c = text[i];
      if (c === '"') {
        var j = i + 1, s = "";
        while (j < n && text[j] !== '"') { if (text[j] === "\\") { j++; } s += text[j] || ""; j++; }
        if (j >= n) {
          if (!expectKey) { return null; }
          return { path: frames.slice(1).map(function (f) { return f.segment; }), partial: s };
        }
        if (expectKey) { key = s; }
        i = j + 1; continue;
      }
      if (c === "{" || c === "[") {
        var parent = frames[frames.length - 1];
        frames.push({ obj: c === "{", segment: parent && !parent.obj ? "0" : key });
        key = null; expectKey = c === "{";
      } else if (c === "}" || c === "]") { frames.pop(); expectKey = false; }
      else if (c === ":") { expectKey = false; }
      else if (c === ",") { var top = frames[frames.length - 1]; expectKey = !!(top && top.obj); }
      i++;
    }
    return null;
  }

  function hideSuggest() { suggest.hidden = true; suggest.innerHTML = ""; }

  function offerKeys() {
    if (!schemaPaths.length) { return; }
    var caret = envelope.selectionStart;
    var ctx = keyContext(envelope.value.slice(0, caret));
    if (!ctx) { hideSuggest(); return; }
    var seen = {}, items = [];
    schemaPaths.forEach(function (p) {
      var segs = p.segments;
      if (segs.length !== ctx.path.length + 1) { return; }
      for (var k = 0; k < ctx.path.length; k++) { if (segs[k] !== ctx.path[k]) { return; } }
      var name = segs[segs.length - 1];
      if (name.indexOf(ctx.partial) !== 0 || seen[name]) { return; }
      seen[name] = true;
      items.push({ name: name, type: p.type, description: p.description });
    });
    suggest.innerHTML = "";
    items.forEach(function (item) {
      var li = document.createElement("li");
      li.setAttribute("role", "option");
      li.dataset.key = item.name;
      var code = document.createElement("code");
      code.textContent = item.name;
      li.appendChild(code);
      li.appendChild(document.createTextNode(" " + item.type + (item.description ? " — " + item.description : "")));
      li.addEventListener("mousedown", function (ev) {
        ev.preventDefault();
        var before = envelope.value.slice(0, caret - ctx.partial.length), after = envelope.value.slice(caret);
        var inserted = item.name + '": ';
        envelope.value = before + inserted + after.replace(/^"/, "");  // a closing quote typed already
        envelope.selectionStart = envelope.selectionEnd = before.length + inserted.length;
        hideSuggest();
        soon();
      });
      suggest.appendChild(li);
    });
    suggest.hidden = !items.length;
  }

  function switchMode() {
    var stack = mode() === "stack";
    $("rule-box").hidden = stack;
    $("output-box").hidden = stack;
    $("stack-box").hidden = !stack;
    $("stack-result").hidden = !stack;
    loadPaths();
    run();
  }

  rule.addEventListener("input", soon);
  rule.addEventListener("scroll", syncScroll);
  envelope.addEventListener("input", function () { offerKeys(); soon(); });
  envelope.addEventListener("blur", function () { window.setTimeout(hideSuggest, 200); });
  output.addEventListener("input", soon);
  var stackSelect = $("stack");
  if (stackSelect) { stackSelect.addEventListener("change", function () { loadPaths(); run(); }); }
  Array.prototype.forEach.call(document.querySelectorAll('input[name="mode"]'), function (r) {
    r.addEventListener("change", switchMode);
  });
  run();
})();
