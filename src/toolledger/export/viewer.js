(function () {
  "use strict";
  // All run text is rendered with textContent, never as markup.
  var data = JSON.parse(document.getElementById("tl-data").textContent);
  var evs = data.events || [];
  var n = evs.length;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- the tree: iterative pre-order, no recursion (depth 1,000 is fine) ----
  var idx = new Map();
  for (var i = 0; i < n; i++) idx.set(evs[i].event_id, i);
  var children = new Array(n), roots = [];
  for (i = 0; i < n; i++) {
    var p = idx.get(evs[i].parent_id);
    if (p === undefined || p === i) roots.push(i);
    else (children[p] || (children[p] = [])).push(i);
  }
  var order = [], depthOf = [], parentPos = [], seen = new Uint8Array(n);
  var stack = [];
  for (i = roots.length - 1; i >= 0; i--) stack.push([roots[i], 0, -1]);
  function walk() {
    while (stack.length) {
      var top = stack.pop(), e = top[0];
      if (seen[e]) continue;
      seen[e] = 1;
      var pos = order.length;
      order.push(e); depthOf.push(top[1]); parentPos.push(top[2]);
      var c = children[e];
      if (c) for (var k = c.length - 1; k >= 0; k--) stack.push([c[k], top[1] + 1, pos]);
    }
  }
  walk();
  for (i = 0; i < n; i++) if (!seen[i]) { stack.push([i, 0, -1]); walk(); }
  var m = order.length;
  var size = new Int32Array(m);
  for (i = m - 1; i >= 0; i--) { size[i] += 1; if (parentPos[i] >= 0) size[parentPos[i]] += size[i]; }

  // ---- the timeline: one bar per event, from the run's first start to its last end ----
  var t0 = Infinity, t1 = -Infinity;
  for (i = 0; i < n; i++) {
    var s0 = evs[i].ts_start_ms, s1 = evs[i].ts_end_ms;
    if (typeof s0 === "number") { if (s0 < t0) t0 = s0; if (s0 > t1) t1 = s0; }
    if (typeof s1 === "number" && s1 > t1) t1 = s1;
  }
  var span = t1 > t0 ? t1 - t0 : 1;
  var posOf = new Int32Array(n);
  for (i = 0; i < m; i++) posOf[order[i]] = i;

  // ---- links: a tool call and the approvals of the same checkpoint (namespace/call id) ----
  var checkpoints = data.checkpoints || {};
  function keyOf(ev) {
    var c = ev.checkpoint;
    if (c && c.namespace && c.call_id) return c.namespace + "/" + c.call_id;
    if (ev.approval && ev.approval.for_call) return (run.namespace || "default") + "/" + ev.approval.for_call;
    return null;
  }
  var run = data.run || {};
  var callsByKey = new Map(), approvalsByKey = new Map();
  for (i = 0; i < n; i++) {
    var key = keyOf(evs[i]);
    if (!key) continue;
    var into = evs[i].kind === "approval" ? approvalsByKey : (evs[i].kind === "tool_call" ? callsByKey : null);
    if (into) (into.get(key) || (into.set(key, []), into.get(key))).push(i);
  }

  // ---- header ----
  if (data.back) {
    var back = el("a", "back", "\u2190 all runs");
    back.href = data.back;
    document.querySelector("header").insertBefore(back, document.getElementById("title"));
  }
  document.getElementById("title").textContent = "Run: " + (run.goal === null || run.goal === undefined ? "(goal erased)" : run.goal);
  document.title = "toolledger · " + (run.goal || run.run_id || "run");
  var facts = document.getElementById("facts");
  [["run", run.run_id], ["agent", run.agent], ["status", run.status], ["namespace", run.namespace],
   ["started", run.started_at], ["ended", run.ended_at], ["records", run.event_count],
   ["events", n], ["head", run.head_hash]].forEach(function (f) {
    if (f[1] === null || f[1] === undefined || f[1] === "") return;
    var s = el("span"); s.appendChild(el("b", null, f[0] + " ")); s.appendChild(document.createTextNode(String(f[1])));
    facts.appendChild(s);
  });

  // ---- rows: a virtual list (only the rows in view exist in the DOM) ----
  var ROW_H = 24, OVERSCAN = 30;
  var tree = document.getElementById("tree");
  var spacer = el("div", "spacer"), layer = el("div", "layer");
  spacer.appendChild(layer);
  tree.appendChild(spacer);
  tree.setAttribute("data-nodes", String(m));
  var collapsed = new Uint8Array(m), hit = new Uint8Array(m);
  var shown = new Int32Array(m), nShown = 0;
  var query = "", texts = null, selected = -1, rendered = [-1, -1];
  function statusOf(ev) { return ev.interrupted ? "interrupted" : (ev.status || ""); }
  function buildRow(k) {
    var ev = evs[order[k]], d = depthOf[k];
    var row = el("div", "row " + (ev.kind || "") + " " + statusOf(ev) + (k === selected ? " selected" : "") + (hit[k] ? " hit" : ""));
    row.setAttribute("data-pos", String(k));
    row.style.paddingLeft = (8 + Math.min(d, 40) * 14) + "px";
    var tog = el("button", "tog", size[k] > 1 ? (collapsed[k] && !query ? "\u25B8" : "\u25BE") : "");
    tog.type = "button"; tog.tabIndex = -1;
    row.appendChild(tog);
    if (d > 40) row.appendChild(el("span", "depth", "\u2026" + d));
    row.appendChild(el("span", "kind", ev.kind));
    row.appendChild(el("span", "name", ev.name || ""));
    row.appendChild(el("span", "status " + statusOf(ev), statusOf(ev)));
    if (typeof ev.duration_ms === "number" && ev.kind !== "approval" && ev.kind !== "note" && ev.kind !== "artifact" && ev.kind !== "finish")
      row.appendChild(el("span", "dur", ev.duration_ms.toFixed(1) + " ms"));
    var track = el("span", "track");
    if (typeof ev.ts_start_ms === "number") {
      var end = typeof ev.ts_end_ms === "number" ? ev.ts_end_ms : t1;
      var bar = el("span", "bar " + statusOf(ev) + (typeof ev.ts_end_ms === "number" ? "" : " open"));
      bar.style.left = ((ev.ts_start_ms - t0) / span * 100).toFixed(3) + "%";
      bar.style.width = Math.max(0, (end - ev.ts_start_ms) / span * 100).toFixed(3) + "%";
      bar.title = (ev.ts_start_ms - t0).toFixed(1) + " ms + " + (end - ev.ts_start_ms).toFixed(1) + " ms";
      track.appendChild(bar);
    }
    row.appendChild(track);
    return row;
  }
  function render(force) {
    var first = Math.max(0, Math.floor(tree.scrollTop / ROW_H) - OVERSCAN);
    var last = Math.min(nShown, Math.ceil((tree.scrollTop + (tree.clientHeight || 600)) / ROW_H) + OVERSCAN);
    if (!force && first === rendered[0] && last === rendered[1]) return;
    rendered = [first, last];
    layer.textContent = "";
    layer.style.top = (first * ROW_H) + "px";
    var frag = document.createDocumentFragment();
    for (var j = first; j < last; j++) frag.appendChild(buildRow(shown[j]));
    layer.appendChild(frag);
  }
  tree.addEventListener("scroll", function () { render(false); });
  window.addEventListener("resize", function () { render(false); });

  function flatten(v, out) {
    var st = [v];
    while (st.length) {
      var x = st.pop();
      if (x === null || x === undefined || typeof x === "boolean") continue;
      if (Array.isArray(x)) { for (var a = 0; a < x.length; a++) st.push(x[a]); }
      else if (typeof x === "object") { for (var key in x) if (Object.prototype.hasOwnProperty.call(x, key)) st.push(x[key]); }
      else out.push(String(x));
    }
  }
  function searchText(ev) {
    var out = [];
    flatten([ev.name, ev.kind, statusOf(ev), ev.justification, ev.text, ev.error, ev.approval,
             ev.inputs, ev.outputs, ev.artifacts], out);
    return out.join("\n").toLowerCase();
  }
  var countEl = document.getElementById("count");
  function refresh() {
    var j, matches = 0;
    nShown = 0;
    hit.fill(0);
    if (query) {
      if (!texts) { texts = new Array(m); for (j = 0; j < m; j++) texts[j] = searchText(evs[order[j]]); }
      var show = new Uint8Array(m);
      for (j = 0; j < m; j++) {
        if (texts[j].indexOf(query) >= 0) {
          show[j] = 1; hit[j] = 1; matches++;
          for (var a = parentPos[j]; a >= 0 && !show[a]; a = parentPos[a]) show[a] = 1;
        }
      }
      for (j = 0; j < m; j++) if (show[j]) shown[nShown++] = j;
      countEl.textContent = matches + " of " + m + " events match";
    } else {
      j = 0;
      while (j < m) { shown[nShown++] = j; j += collapsed[j] ? size[j] : 1; }
      countEl.textContent = m + " events";
    }
    tree.setAttribute("data-visible", String(nShown));
    spacer.style.height = (nShown * ROW_H) + "px";
    render(true);
  }
  function setCollapsed(k, value) {
    if (size[k] > 1) collapsed[k] = value ? 1 : 0;
  }
  document.getElementById("search").addEventListener("input", function (e) {
    query = String(e.target.value || "").trim().toLowerCase();
    refresh();
  });
  document.getElementById("expand").addEventListener("click", function () {
    collapsed.fill(0);
    refresh();
  });
  document.getElementById("collapse").addEventListener("click", function () {
    for (var j = 0; j < m; j++) setCollapsed(j, depthOf[j] >= 1);
    refresh();
  });
  document.getElementById("timeline").addEventListener("click", function (e) {
    var off = document.body.classList.toggle("no-timeline");
    e.target.setAttribute("aria-pressed", off ? "false" : "true");
  });
  tree.addEventListener("click", function (e) {
    var t = e.target;
    while (t && t !== tree && !(t.hasAttribute && t.hasAttribute("data-pos"))) t = t.parentNode;
    if (!t || t === tree) return;
    var k = Number(t.getAttribute("data-pos"));
    if (e.target.className === "tog" && !query) { setCollapsed(k, !collapsed[k]); refresh(); return; }
    select(k);
  });

  // ---- details ----
  var details = document.getElementById("details");
  function section(title, value) {
    if (value === null || value === undefined) return;
    if (typeof value === "object" && Object.keys(value).length === 0) return;
    details.appendChild(el("h3", null, title));
    details.appendChild(el("pre", null, typeof value === "string" ? value : JSON.stringify(value, null, 2)));
  }
  function link(text, eventIndex) {
    var a = el("a", "jump", text);
    a.href = "#";
    a.setAttribute("data-jump", String(posOf[eventIndex]));
    return a;
  }
  details.addEventListener("click", function (e) {
    var t = e.target;
    if (!t || !t.getAttribute || t.getAttribute("data-jump") === null) return;
    e.preventDefault();
    var k = Number(t.getAttribute("data-jump"));
    query = ""; document.getElementById("search").value = "";
    for (var a = parentPos[k]; a >= 0; a = parentPos[a]) collapsed[a] = 0;
    refresh();
    for (var j = 0; j < nShown; j++) if (shown[j] === k) { tree.scrollTop = Math.max(0, j * ROW_H - 120); break; }
    select(k);
  });
  function short(v, a, b) {
    if (v === null || v === undefined) return "";
    var s = String(v);
    return s.length > b ? s.slice(a, b) + (a ? "" : "\u2026") : s.slice(a);
  }
  function checkpointLife(ev) {
    var key = keyOf(ev), life = key ? checkpoints[key] : null;
    if (!life) return;
    var box = el("div", "life");
    box.setAttribute("data-checkpoint", key);
    box.appendChild(el("span", "label", "Checkpoint " + key));
    var summary = el("div", "life-summary");
    summary.appendChild(el("span", "status " + (life.status || ""), life.status || "unknown"));
    summary.appendChild(el("span", null, life.delivered ? "delivered at " + life.delivered_at : "not delivered"));
    summary.appendChild(el("span", null, "delivery attempts: " + (life.delivery_attempts || 0)));
    if (typeof life.revision === "number") summary.appendChild(el("span", null, "revision " + life.revision));
    box.appendChild(summary);
    if (life.uncertain_reason) box.appendChild(el("div", "uncertain", "Uncertain: " + life.uncertain_reason));
    if (life.erased) box.appendChild(el("p", "erased", "Erased at " + life.erased.at + ": " + life.erased.reason + " (transitions: " + (life.erased_transitions || []).join(", ") + ")"));
    if (life.error) box.appendChild(el("p", "erased", life.error));
    var rows = life.transitions || [];
    if (rows.length) {
      var table = el("table", "transitions");
      var head = el("tr");
      ["time", "transition", "status", "rev", "attempt id", "delivery id", "deliveries"].forEach(function (h) { head.appendChild(el("th", null, h)); });
      table.appendChild(head);
      rows.forEach(function (r) {
        var tr = el("tr", r.status);
        [[short(r.at, 11, 26), r.at], [r.transition], [r.status], [r.revision],
         [short(r.attempt_id, 0, 12), r.attempt_id], [short(r.delivery_id, 0, 12), r.delivery_id],
         [r.delivery_attempts]].forEach(function (v) {
          var td = el("td", null, v[0]);
          if (v[1] && v[1] !== v[0]) td.title = String(v[1]);
          tr.appendChild(td);
        });
        table.appendChild(tr);
        if (r.uncertain_reason && r.status === "uncertain") {
          var why = el("tr", "uncertain"); var td = el("td", null, "uncertain: " + r.uncertain_reason); td.colSpan = 7; why.appendChild(td); table.appendChild(why);
        }
      });
      box.appendChild(table);
    }
    details.appendChild(box);
  }
  function links(ev) {
    var key = keyOf(ev);
    if (!key) return;
    var others = (ev.kind === "approval" ? callsByKey : approvalsByKey).get(key) || [];
    if (!others.length) return;
    var p = el("div", "links");
    p.appendChild(el("span", "label", ev.kind === "approval" ? "Authorizes" : "Approvals"));
    others.forEach(function (o) {
      var oe = evs[o];
      p.appendChild(link((oe.kind || "") + " " + (oe.name || "") + " [" + statusOf(oe) + "] at " + (oe.started_at || ""), o));
    });
    details.appendChild(p);
  }
  function select(k) {
    selected = k;
    render(true);
    var ev = evs[order[k]];
    details.textContent = "";
    details.appendChild(el("h2", null, (ev.kind || "") + " \u00B7 " + (ev.name || "")));
    var table = el("table");
    [["status", statusOf(ev)], ["event id", ev.event_id], ["parent", ev.parent_id],
     ["started", ev.started_at], ["ended", ev.ended_at],
     ["duration", typeof ev.duration_ms === "number" ? ev.duration_ms + " ms" : null],
     ["checkpoint", ev.checkpoint ? (ev.checkpoint.namespace + "/" + ev.checkpoint.call_id + " (revision " + ev.checkpoint.revision + ")") : null],
     ["trace id", ev.trace_id], ["span id", ev.span_id], ["depth", depthOf[k]]].forEach(function (f) {
      if (f[1] === null || f[1] === undefined) return;
      var tr = el("tr"); tr.appendChild(el("td", null, f[0])); tr.appendChild(el("td", null, f[1]));
      table.appendChild(tr);
    });
    details.appendChild(table);
    if (ev.interrupted) details.appendChild(el("p", "erased", "Interrupted: the run ended or crashed before this event ended."));
    if (ev.erased) details.appendChild(el("p", "erased", "Content erased at " + ev.erased.at + ": " + ev.erased.reason));
    if (ev.justification !== undefined && ev.justification !== null) {
      var why = el("div", "why");
      why.appendChild(el("span", "label", "Why (" + (ev.justification_source || "developer") + ")"));
      why.appendChild(document.createTextNode(ev.justification));
      details.appendChild(why);
    } else if (ev.justification_missing) {
      var miss = el("div", "why");
      miss.appendChild(el("span", "label", "Why"));
      miss.appendChild(document.createTextNode("Missing: the " + (ev.justification_source || "model") + " gave no justification."));
      details.appendChild(miss);
    }
    if (ev.approval) {
      var waiting = ev.approval.granted !== true && ev.approval.granted !== false;
      var box = el("div", "approval-box" + (ev.approval.granted ? "" : " refused"));
      box.appendChild(el("span", "label", waiting ? "Approval requested (waiting for a decision)" : (ev.approval.granted ? "Approval granted" : "Approval refused") + " by " + ev.approval.by));
      if (ev.approval.reason) box.appendChild(document.createTextNode(ev.approval.reason));
      if (ev.approval.for_call) box.appendChild(el("div", null, "for call " + ev.approval.for_call + (ev.approval.binding_fingerprint ? " (" + ev.approval.binding_fingerprint + ")" : "")));
      if (ev.approval.input_fingerprint) box.appendChild(el("div", null, "bound to input " + ev.approval.input_fingerprint + (ev.approval.tool_revision ? " (tool revision " + ev.approval.tool_revision + ")" : "")));
      details.appendChild(box);
    }
    links(ev);
    if (ev.kind === "tool_call") checkpointLife(ev);
    if (ev.error) {
      var eb = el("div", "error-box");
      eb.appendChild(el("span", "label", ev.error.type || "error"));
      eb.appendChild(el("div", null, ev.error.message || JSON.stringify(ev.error)));
      details.appendChild(eb);
    }
    section("Text", ev.text);
    section("Inputs", ev.inputs);
    section("Outputs", ev.outputs);
    section("Artifacts", ev.artifacts);
    section("Meta", ev.meta);
    section("Other fields", ev.extra);
  }
  refresh();
  if (m) select(0);
})();
