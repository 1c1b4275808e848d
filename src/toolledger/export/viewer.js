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

  var hasOwn = Object.prototype.hasOwnProperty;

  // ---- one-line previews (bounded: a huge value costs no more than a short one) ----
  function brief(v, budget) {
    var out = [], left = budget;
    function put(s) { if (left > 0) { out.push(s.length > left ? s.slice(0, left) : s); left -= s.length; } }
    function go(x, d) {
      if (left <= 0) return;
      if (x === null || x === undefined) { put("null"); return; }
      if (typeof x === "string") { put(JSON.stringify(x.length > left + 2 ? x.slice(0, left + 2) : x)); return; }
      if (typeof x !== "object") { put(String(x)); return; }
      if (d >= 3) { put(Array.isArray(x) ? "[\u2026]" : "{\u2026}"); return; }
      var first = true;
      if (Array.isArray(x)) {
        put("[");
        for (var a = 0; a < x.length && left > 0; a++) { if (!first) put(", "); first = false; go(x[a], d + 1); }
        put("]");
        return;
      }
      if (d) put("{");
      for (var key in x) {
        if (!hasOwn.call(x, key)) continue;
        if (left <= 0) break;
        if (!first) put(", ");
        first = false;
        put(key + (d ? ": " : "=")); go(x[key], d + 1);
      }
      if (d) put("}");
    }
    go(v, 0);
    var s = out.join("").replace(/\s+/g, " ");
    return s.length >= budget ? s.slice(0, budget - 1) + "\u2026" : s;
  }
  function cut(s, budget) {
    s = String(s).replace(/\s+/g, " ");
    return s.length > budget ? s.slice(0, budget - 1) + "\u2026" : s;
  }
  // A <wbr> after each "_" lets a long snake_case name wrap at its words (text stays exact).
  function breakable(td, s) {
    td.textContent = "";
    String(s).split("_").forEach(function (part, i) {
      if (i) { td.appendChild(document.createTextNode("_")); td.appendChild(document.createElement("wbr")); }
      td.appendChild(document.createTextNode(part));
    });
  }
  function durText(ms) {
    if (ms < 1) return Math.round(ms * 1000) + " \u00B5s";
    return ms < 1000 ? ms.toFixed(1) + " ms" : (ms / 1000).toFixed(2) + " s";
  }
  function isEmpty(v) {
    return v === null || v === undefined || (typeof v === "object" && Object.keys(v).length === 0);
  }
  function previewOf(ev) {
    var B = 160, parts = [];
    if (ev.approval) {
      var ap = ev.approval;
      if (ap.for_call) parts.push("for " + ap.for_call);
      if (ap.ticket) parts.push("ticket " + ap.ticket);
      if (ap.by) parts.push("by " + ap.by);
      if (ap.reason) parts.push(ap.reason);
      return cut(parts.join(" \u00B7 "), B);
    }
    if (ev.artifact) {
      var ar = ev.artifact;
      return [ar.media_type, typeof ar.size === "number" ? ar.size + " B" : null, ar.path].filter(Boolean).join(" \u00B7 ");
    }
    if (typeof ev.text === "string" && isEmpty(ev.inputs) && isEmpty(ev.outputs)) return cut(ev.text, B);
    if (!isEmpty(ev.inputs)) parts.push(brief(ev.inputs, B));
    if (ev.error) parts.push("\u2717 " + (ev.error.type ? ev.error.type + ": " : "") + (ev.error.message || ""));
    else if (!isEmpty(ev.outputs)) parts.push(brief(ev.outputs, B));
    return cut(parts.join(" \u2192 "), B);
  }

  // ---- times: relative to the run's start; absolute (with zone) on hover ----
  function relText(d) {
    var sign = d < 0 ? "\u2212" : "+", a = Math.abs(d);
    if (a < 1000) return sign + Math.round(a) + " ms";
    if (a < 60000) return sign + (a / 1000).toFixed(3) + " s";
    var h = Math.floor(a / 3600000), mi = Math.floor(a / 60000) % 60, sec = (a % 60000) / 1000;
    var ss = (sec < 10 ? "0" : "") + sec.toFixed(h ? 0 : 3);
    return sign + (h ? h + " h " + (mi < 10 ? "0" : "") + mi + " m " : mi + " m ") + ss + " s";
  }
  function absText(iso, ms) {
    var s = String(iso).replace("T", " ").replace(/\+00:00$|Z$/, " UTC");
    if (typeof ms === "number") s += "\nyour time: " + new Date(ms).toString();
    return s;
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
  var tRun = typeof (data.run || {}).ts_start_ms === "number" ? data.run.ts_start_ms : (t0 < Infinity ? t0 : null);
  function timeEl(iso, ms) {
    if (iso === null || iso === undefined) return null;
    if (typeof ms !== "number" || tRun === null) return el("span", "time", iso);
    var t = el("span", "time", relText(ms - tRun));
    t.title = absText(iso, ms);
    t.setAttribute("data-abs", String(iso));
    return t;
  }
  function relOf(iso, ms) { return typeof ms === "number" && tRun !== null ? relText(ms - tRun) : (iso || ""); }
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
  var runEnd = run.ended_at ? Date.parse(run.ended_at) : NaN;
  var src = run.source, srcText = null;  // from the run's hashed header: replay_of / forked_from
  if (src && src.run_id) srcText = src.mode === "fork" ? "fork of " + src.run_id + " at " + src.event_id : "replay of " + src.run_id;
  [["run", run.run_id], ["source", srcText], ["agent", run.agent], ["status", run.status], ["namespace", run.namespace],
   ["started", run.started_at ? absText(run.started_at).split("\n")[0] : null],
   ["ended", run.ended_at ? relOf(run.ended_at, isNaN(runEnd) ? null : runEnd) : null], ["records", run.event_count],
   ["events", n], ["head", run.head_hash]].forEach(function (f) {
    if (f[1] === null || f[1] === undefined || f[1] === "") return;
    var s = el("span", f[0] === "head" || f[0] === "run" ? "hash" : null); s.appendChild(el("b", null, f[0] + " ")); s.appendChild(document.createTextNode(String(f[1])));
    if (f[0] === "ended") s.title = absText(run.ended_at, isNaN(runEnd) ? null : runEnd);
    if (f[0] === "started" && typeof run.ts_start_ms === "number") s.title = absText(run.started_at, run.ts_start_ms);
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
  var shownAt = new Int32Array(m).fill(-1), previews = new Array(m);
  function statusOf(ev) { return ev.interrupted ? "interrupted" : (ev.status || ""); }
  function buildRow(k) {
    var ev = evs[order[k]], d = depthOf[k];
    var row = el("div", "row " + (ev.kind || "") + " " + statusOf(ev) + (k === selected ? " selected" : "") + (hit[k] ? " hit" : ""));
    row.setAttribute("data-pos", String(k));
    row.style.paddingLeft = (8 + Math.min(d, indentCap) * 14) + "px";
    var tog = el("button", "tog", size[k] > 1 ? (collapsed[k] && !query ? "\u25B8" : "\u25BE") : "");
    tog.type = "button"; tog.tabIndex = -1;
    row.appendChild(tog);
    if (d > indentCap) row.appendChild(el("span", "depth", "\u2026" + d));
    row.appendChild(el("span", "kind", ev.kind));
    row.appendChild(el("span", "name", ev.name || ""));
    row.appendChild(el("span", "status " + statusOf(ev), statusOf(ev)));
    if (previews[k] === undefined) previews[k] = previewOf(ev);
    row.appendChild(el("span", "preview", previews[k]));
    if (typeof ev.duration_ms === "number" && ev.kind !== "approval" && ev.kind !== "note" && ev.kind !== "artifact" && ev.kind !== "finish")
      row.appendChild(el("span", "dur", durText(ev.duration_ms)));
    var track = el("span", "track");
    if (typeof ev.ts_start_ms === "number") {
      var end = typeof ev.ts_end_ms === "number" ? ev.ts_end_ms : t1;
      var bar = el("span", "bar " + statusOf(ev) + (typeof ev.ts_end_ms === "number" ? "" : " open"));
      // Anchored at its end: a bar shorter than its minimum width grows back into its parent's, not past it.
      bar.style.right = Math.max(0, (t0 + span - end) / span * 100).toFixed(3) + "%";
      bar.style.width = Math.max(0, (end - ev.ts_start_ms) / span * 100).toFixed(3) + "%";
      bar.title = relOf(ev.started_at, ev.ts_start_ms) + " for " + (end - ev.ts_start_ms).toFixed(1) + " ms";
      track.appendChild(bar);
    }
    row.appendChild(track);
    return row;
  }
  // Indentation stops where the row would leave too little room (at most 40 levels);
  // deeper rows show their depth ("…57").
  var indentCap = 40;
  function capFor() {
    var free = (tree.clientWidth || 800) - (document.body.classList.contains("no-timeline") ? 0 : (window.innerWidth >= 1600 ? 290 : 230)) - 320;
    return Math.max(3, Math.min(40, Math.floor(free / 14)));
  }
  function render(force) {
    var cap = capFor();
    if (cap !== indentCap) { indentCap = cap; force = true; }
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
  // (render re-reads the cap, so a resize or the timeline toggle re-indents the rows)

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
    shownAt.fill(-1);
    for (j = 0; j < nShown; j++) shownAt[shown[j]] = j;
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
    render(false);
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
  // ---- collapsible JSON with a copy button (all text via textContent) ----
  var JSON_TREE_MAX = 200000, JSON_OPEN_DEPTH = 2, JSON_DEPTH_MAX = 60;
  function copyText(text, btn) {
    function done(ok) { btn.textContent = ok ? "Copied" : "Copy failed"; btn.setAttribute("data-copied", ok ? "yes" : "no"); }
    function fallback() {
      var ta = el("textarea", "copy-buffer");
      ta.value = text;
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      document.body.removeChild(ta);
      return ok;
    }
    try {
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback()); });
        return;
      }
    } catch (err) { /* fall through */ }
    done(fallback());
  }
  function jsonNode(value, label, depth) {
    var isArr = Array.isArray(value);
    if (value === null || typeof value !== "object" || depth >= JSON_DEPTH_MAX) {
      var line = el("div", "jl");
      if (label !== null) line.appendChild(el("span", "jk", label + ": "));
      var t = value === null ? "null" : typeof value;
      var text = t === "object" ? JSON.stringify(value) : (t === "string" ? JSON.stringify(value) : String(value));
      line.appendChild(el("span", "jv " + t, text));
      return line;
    }
    var keys = isArr ? null : Object.keys(value), count = isArr ? value.length : keys.length;
    var open = isArr ? "[" : "{", close = isArr ? "]" : "}";
    if (!count) return jsonNode(isArr ? [] : {}, label, JSON_DEPTH_MAX);
    var d = el("details", "jn");
    if (depth < JSON_OPEN_DEPTH) d.open = true;
    var sm = el("summary");
    if (label !== null) sm.appendChild(el("span", "jk", label + ": "));
    sm.appendChild(el("span", "jb", open));
    sm.appendChild(el("span", "jsum", " " + count + (isArr ? (count === 1 ? " item " : " items ") : (count === 1 ? " key " : " keys ")) + close));
    d.appendChild(sm);
    var body = el("div", "jc");
    for (var i = 0; i < count; i++) {
      var key = isArr ? i : keys[i];
      body.appendChild(jsonNode(value[key], isArr ? String(i) : JSON.stringify(key), depth + 1));
    }
    d.appendChild(body);
    d.appendChild(el("div", "jb", close));
    return d;
  }
  function section(title, value, parent) {
    if (isEmpty(value)) return;
    var into = parent || details;
    var text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    var head = el("h3", "sec");
    head.appendChild(el("span", null, title));
    var btn = el("button", "copy", "Copy");
    btn.type = "button";
    btn.title = "Copy " + title.toLowerCase() + (typeof value === "string" ? "" : " as JSON");
    btn.addEventListener("click", function () { copyText(text, btn); });
    head.appendChild(btn);
    into.appendChild(head);
    if (typeof value !== "object" || text.length > JSON_TREE_MAX) {
      into.appendChild(el("pre", null, text));
      return;
    }
    var box = el("div", "json");
    box.appendChild(jsonNode(value, null, 0));
    into.appendChild(box);
  }
  function kv(rows, cls) {
    var table = el("table", cls || "kv");
    rows.forEach(function (f) {
      if (f[1] === null || f[1] === undefined || f[1] === "") return;
      var tr = el("tr"); tr.appendChild(el("td", null, f[0]));
      var td = el("td", f[2] || null);
      if (typeof f[1] === "object" && f[1].nodeType) td.appendChild(f[1]); else td.textContent = String(f[1]);
      tr.appendChild(td);
      table.appendChild(tr);
    });
    return table;
  }
  function hashOf(k) { return "#" + encodeURIComponent(String(evs[order[k]].event_id)); }
  function link(text, eventIndex) {
    var a = el("a", "jump", text);
    a.href = hashOf(posOf[eventIndex]);
    a.setAttribute("data-jump", String(posOf[eventIndex]));
    return a;
  }
  // Open row k: clear the search, unfold its ancestors, scroll it into the middle, select it.
  function reveal(k) {
    if (query || shownAt[k] < 0) {
      query = ""; document.getElementById("search").value = "";
      for (var a = parentPos[k]; a >= 0; a = parentPos[a]) collapsed[a] = 0;
      refresh();
    }
    var j = shownAt[k];
    if (j >= 0) tree.scrollTop = Math.max(0, j * ROW_H - Math.floor((tree.clientHeight || 600) / 2));
    select(k);
  }
  details.addEventListener("click", function (e) {
    var t = e.target;
    if (!t || !t.getAttribute || t.getAttribute("data-jump") === null) return;
    e.preventDefault();
    reveal(Number(t.getAttribute("data-jump")));
  });
  // The URL names the selected event (#<event id>): a link that opens it.
  // Written 150 ms after the selection settles: a held arrow key does not flood the
  // history API (browsers throttle it).
  var hashTimer = null;
  function setHash(k) {
    if (hashTimer !== null) clearTimeout(hashTimer);
    hashTimer = setTimeout(function () {
      hashTimer = null;
      var h = hashOf(k);
      if (location.hash === h) return;
      try { history.replaceState(null, "", h); } catch (err) { location.replace(h); }
    }, 150);
  }
  function openHash() {
    var h = location.hash.slice(1), id;
    if (!h) return false;
    try { id = decodeURIComponent(h); } catch (err) { return false; }
    var i = idx.get(id);
    if (i === undefined) return false;
    if (posOf[i] !== selected) reveal(posOf[i]);
    return true;
  }
  window.addEventListener("hashchange", openHash);

  // ---- keyboard: up/down move between rows, left/right fold, Home/End ----
  function moveTo(j) {
    if (!nShown) return;
    j = Math.max(0, Math.min(nShown - 1, j));
    var top = j * ROW_H, h = tree.clientHeight || 600;
    if (top < tree.scrollTop) tree.scrollTop = top;
    else if (top + ROW_H > tree.scrollTop + h) tree.scrollTop = top + ROW_H - h;
    select(shown[j]);
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
    var j = selected >= 0 ? shownAt[selected] : -1;
    if (e.key === "ArrowDown" || e.key === "j") moveTo(j + 1);
    else if (e.key === "ArrowUp" || e.key === "k") moveTo(j < 0 ? 0 : j - 1);
    else if (e.key === "Home") moveTo(0);
    else if (e.key === "End") moveTo(nShown - 1);
    else if (e.key === "ArrowRight" && selected >= 0 && !query && collapsed[selected]) { collapsed[selected] = 0; refresh(); }
    else if (e.key === "ArrowLeft" && selected >= 0 && !query) {
      if (size[selected] > 1 && !collapsed[selected]) { collapsed[selected] = 1; refresh(); }
      else if (parentPos[selected] >= 0) moveTo(shownAt[parentPos[selected]]);
      else return;
    } else return;
    e.preventDefault();
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
    var dl = el("span", null, life.delivered ? "delivered at " + relOf(life.delivered_at, Date.parse(life.delivered_at)) : "not delivered");
    if (life.delivered_at) dl.title = absText(life.delivered_at, Date.parse(life.delivered_at));
    summary.appendChild(dl);
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
      [["time", "since the run started"], ["transition"], ["status"], ["rev", "revision"], ["attempt", "attempt id"],
       ["delivery", "delivery id"], ["tries", "delivery attempts"]].forEach(function (h) {
        var th = el("th", null, h[0]);
        if (h[1]) th.title = h[1];
        head.appendChild(th);
      });
      table.appendChild(head);
      rows.forEach(function (r) {
        var tr = el("tr", r.status);
        [[relOf(r.at, r.at_ms), r.at ? absText(r.at, r.at_ms) : null], [r.transition], [r.status], [r.revision],
         [short(r.attempt_id, 0, 12), r.attempt_id], [short(r.delivery_id, 0, 12), r.delivery_id],
         [r.delivery_attempts]].forEach(function (v, col) {
          var td = el("td", null, v[0]);
          if (col === 1 && v[0]) breakable(td, v[0]);
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
      p.appendChild(link((oe.kind || "") + " " + (oe.name || "") + " [" + statusOf(oe) + "] at " + relOf(oe.started_at, oe.ts_start_ms), o));
    });
    details.appendChild(p);
  }
  function approvalBox(ev) {
    var ap = ev.approval, key = keyOf(ev), life = key ? checkpoints[key] : null;
    var req = life && life.approval ? life.approval : null;
    var state = ap.granted === true ? "granted" : (ap.granted === false ? "refused" : "pending");
    var box = el("div", "approval-box " + state);
    box.setAttribute("data-state", state);
    box.appendChild(el("span", "label", state === "pending" ? "Approval pending: waiting for a decision" :
      (state === "granted" ? "Approval granted" : "Approval refused") + " by " + ap.by));
    if (ap.reason) box.appendChild(el("div", "reason", ap.reason));
    if (req && req.status && req.status !== "pending" && state === "pending") {
      box.appendChild(el("div", "now", "Decided since: " + req.status + " by " + req.by +
        (req.decided_at ? " at " + relOf(req.decided_at, Date.parse(req.decided_at)) : "") + (req.reason ? " (" + req.reason + ")" : "")));
    }
    var decided = ap.decided_at || (req && req.decided_at);
    box.appendChild(kv([
      ["ticket", ap.ticket || (req && req.ticket)],
      ["tool", (ev.name || (req && req.tool) || "") + (ap.tool_revision ? " (revision " + ap.tool_revision + ")" : "")],
      ["call", ap.for_call ? (key || ap.for_call) : null],
      ["mode", ap.mode],
      ["requested", req && req.requested_at ? timeEl(req.requested_at, Date.parse(req.requested_at)) : null],
      ["decided", decided ? timeEl(decided, Date.parse(decided)) : null],
      ["expires", ap.expires_at ? timeEl(ap.expires_at, Date.parse(ap.expires_at)) : null],
      ["binding", ap.binding_fingerprint, "hash"],
      ["bound to input", ap.input_fingerprint, "hash"]
    ], "kv approval-facts"));
    if (req && req.description) box.appendChild(el("div", "description", req.description));
    var why = req && req.justification;
    if (!why && ap.for_call) {
      var calls = callsByKey.get(key) || [];
      for (var c = 0; c < calls.length && !why; c++) why = evs[calls[c]].justification;
    }
    if (why) {
      var w = el("div", "why");
      w.appendChild(el("span", "label", "Justification (what the approver is shown)"));
      w.appendChild(document.createTextNode(why));
      box.appendChild(w);
    }
    if (req && req.input !== null && req.input !== undefined) section("Input to authorize", req.input, box);
    else if (req) box.appendChild(el("p", "erased", "The stored request keeps no input (too large, or erased); the input fingerprint binds it."));
    if (req && req.error) box.appendChild(el("p", "erased", req.error));
    details.appendChild(box);
  }
  function artifactBox(a) {
    var box = el("div", "artifact-box");
    box.appendChild(el("span", "label", "Artifact " + (a.name || "")));
    box.appendChild(kv([["name", a.name], ["media type", a.media_type],
      ["size", typeof a.size === "number" ? a.size.toLocaleString("en-US") + " bytes" : a.size],
      ["sha256", a.sha256, "hash"], ["path", a.path, "hash"], ["uri", a.uri, "hash"]]));
    details.appendChild(box);
  }
  function select(k, keepUrl) {
    var prev = selected;
    selected = k;
    render(false);  // a new window of rows is built with the selection; else mark it in place
    var old = prev >= 0 ? layer.querySelector('[data-pos="' + prev + '"]') : null;
    if (old) old.classList.remove("selected");
    var now = layer.querySelector('[data-pos="' + k + '"]');
    if (now) now.classList.add("selected");
    var ev = evs[order[k]];
    if (!keepUrl) setHash(k);
    details.textContent = "";
    details.appendChild(el("h2", null, (ev.kind || "") + " \u00B7 " + (ev.name || "")));
    if (ev.approval) approvalBox(ev);
    var idLink = el("a", "hash", ev.event_id);
    idLink.href = hashOf(k);
    idLink.title = "A link to this event";
    details.appendChild(kv([["status", statusOf(ev)], ["event id", idLink], ["parent", ev.parent_id, "hash"],
     ["started", timeEl(ev.started_at, ev.ts_start_ms)], ["ended", timeEl(ev.ended_at, ev.ts_end_ms)],
     ["duration", typeof ev.duration_ms === "number" ? ev.duration_ms + " ms" : null],
     ["checkpoint", ev.checkpoint ? (ev.checkpoint.namespace + "/" + ev.checkpoint.call_id + " (revision " + ev.checkpoint.revision + ")") : null, "hash"],
     ["trace id", ev.trace_id, "hash"], ["span id", ev.span_id, "hash"], ["depth", depthOf[k]]], "kv facts"));
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
    if (ev.artifact) artifactBox(ev.artifact);
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
    section("Artifact", ev.artifact);
    section("Artifacts", ev.artifacts);
    section("Meta", ev.meta);
    section("Other fields", ev.extra);
  }
  refresh();
  if (!openHash() && m) select(0, true);
})();
