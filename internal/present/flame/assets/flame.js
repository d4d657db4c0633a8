// wallprof flame graph viewer: draws the call tree embedded in #flame-data
// (format: writeJSON in json.go) on a canvas. No network, no libraries.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("flame-data").textContent);
  var NS = D.states.length; // on-cpu, runnable, sleeping, disk, other
  var diff = D.diff;
  var stride = 2 + NS * (diff ? 2 : 1);
  var T = D.tree;
  var N = T.length / stride;
  var ROW = 18, MINPX = 0.4;
  var WEIGHT_NAMES = { wall: "wall", cpu: "on-CPU", offcpu: "off-CPU" };

  // The tree, from its preorder form.
  var names = new Array(N), depth = new Int32Array(N), parent = new Int32Array(N), kids = new Array(N);
  var val = new Float64Array(N * NS), bval = diff ? new Float64Array(N * NS) : null;
  (function () {
    var stack = [];
    for (var i = 0; i < N; i++) {
      var o = i * stride;
      names[i] = D.names[T[o]];
      kids[i] = [];
      for (var s = 0; s < NS; s++) {
        val[i * NS + s] = T[o + 2 + s];
        if (diff) bval[i * NS + s] = T[o + 2 + NS + s];
      }
      while (stack.length && stack[stack.length - 1].left === 0) stack.pop();
      if (stack.length) {
        var top = stack[stack.length - 1];
        parent[i] = top.node;
        depth[i] = depth[top.node] + 1;
        kids[top.node].push(i);
        top.left--;
      } else {
        parent[i] = -1;
      }
      if (T[o + 1] > 0) stack.push({ node: i, left: T[o + 1] });
    }
  })();

  var st = { weight: D.weight in WEIGHT_NAMES ? D.weight : "wall", icicle: !!D.icicle, zoom: 0, re: null, share: null };
  var cur = new Float64Array(N), curB = diff ? new Float64Array(N) : null;
  var matched = new Uint8Array(N);
  var rects = [], rows = [], maxDelta = 0, hover = -1;

  function weigh(v, i, w) {
    var o = i * NS, on = v[o], off = 0;
    for (var s = 1; s < NS; s++) off += v[o + s];
    return w === "cpu" ? on : w === "offcpu" ? off : on + off;
  }
  function setWeight(w) {
    st.weight = w;
    var perSecA = diff ? 1e9 / Math.max(D.duration, 1) : 1, perSecB = diff ? 1e9 / Math.max(D.beforeDuration, 1) : 1;
    maxDelta = 0;
    for (var i = 0; i < N; i++) {
      cur[i] = weigh(val, i, w);
      if (diff) {
        curB[i] = weigh(bval, i, w);
        if (i > 0) maxDelta = Math.max(maxDelta, Math.abs(cur[i] * perSecA - curB[i] * perSecB));
      }
    }
    var bs = document.querySelectorAll("#weights button");
    for (var b = 0; b < bs.length; b++) bs[b].className = bs[b].getAttribute("data-weight") === w ? "on" : "";
    if (cur[st.zoom] <= 0) st.zoom = 0;
    updateMatch();
  }

  // Colours: the hue says what dominates a frame (on-CPU, runnable or
  // blocked); a hash of the name varies it a little, the same on every run.
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return (h >>> 0) / 4294967296;
  }
  var KINDS = [
    { name: "on-CPU", hue: 22, spread: 20, sat: 88, light: 58 },
    { name: "runnable", hue: 300, spread: 16, sat: 45, light: 66 },
    { name: "blocked", hue: 205, spread: 16, sat: 70, light: 64 },
  ];
  function kindOf(i) {
    var o = i * NS, on = val[o], run = val[o + 1], blk = 0;
    for (var s = 2; s < NS; s++) blk += val[o + s];
    if (st.weight === "cpu") return 0;
    if (st.weight === "offcpu") return run >= blk ? 1 : 2;
    return on >= run && on >= blk ? 0 : run >= blk ? 1 : 2;
  }
  function kindColor(k, h) {
    var K = KINDS[k];
    return "hsl(" + (K.hue + (h - 0.5) * K.spread).toFixed(1) + "," + K.sat + "%," + (K.light + (h - 0.5) * 10).toFixed(1) + "%)";
  }
  function delta(i) {
    return cur[i] * 1e9 / Math.max(D.duration, 1) - curB[i] * 1e9 / Math.max(D.beforeDuration, 1);
  }
  function color(i) {
    if (st.re && matched[i]) return "rgb(110,215,60)";
    if (diff) {
      var r = maxDelta > 0 ? delta(i) / maxDelta : 0;
      r = Math.sign(r) * Math.sqrt(Math.min(1, Math.abs(r)));
      var l = (94 - 44 * Math.abs(r)).toFixed(1);
      return r >= 0 ? "hsl(0,85%," + l + "%)" : "hsl(220,85%," + l + "%)";
    }
    return kindColor(kindOf(i), hash(names[i]));
  }

  // Layout: the zoomed frame spans the width, its ancestors too (faded),
  // its descendants in proportion to their weight.
  var chart = document.getElementById("chart"), canvas = document.getElementById("canvas");
  var ctx = canvas.getContext("2d");
  var FONT = "12px ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace";
  function layout(W) {
    rects = [];
    rows = [];
    var z = st.zoom, tot = cur[z], maxD = depth[z];
    if (tot <= 0) return 0;
    for (var a = parent[z]; a >= 0; a = parent[a]) rects.push({ i: a, x: 0, w: W, d: depth[a], anc: true });
    var scale = W / tot, todo = [z, 0];
    while (todo.length) {
      var x = todo.pop(), i = todo.pop(), w = cur[i] * scale;
      if (w < MINPX) continue;
      rects.push({ i: i, x: x, w: w, d: depth[i], anc: false });
      if (depth[i] > maxD) maxD = depth[i];
      var cx = x, ks = kids[i];
      for (var k = 0; k < ks.length; k++) {
        if (cur[ks[k]] <= 0) continue;
        todo.push(ks[k], cx);
        cx += cur[ks[k]] * scale;
      }
    }
    for (var r = 0; r < rects.length; r++) {
      var d = rects[r].d;
      (rows[d] || (rows[d] = [])).push(rects[r]);
    }
    for (var j = 0; j < rows.length; j++) if (rows[j]) rows[j].sort(function (p, q) { return p.x - q.x; });
    return maxD + 1;
  }

  var levels = 0;
  function render() {
    var W = Math.max(200, chart.clientWidth - 24), dpr = window.devicePixelRatio || 1;
    levels = layout(W);
    var H = Math.max(levels, 1) * ROW;
    canvas.style.width = W + "px";
    canvas.style.height = H + "px";
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    var cw = ctx.measureText("mmmmmmmmmm").width / 10;
    for (var r = 0; r < rects.length; r++) {
      var R = rects[r];
      R.y = yOf(R.d);
      ctx.globalAlpha = R.anc ? 0.55 : 1;
      ctx.fillStyle = color(R.i);
      ctx.fillRect(R.x, R.y, Math.max(R.w - 0.5, 0.4), ROW - 1);
      if (R.i === hover) {
        ctx.strokeStyle = "#222";
        ctx.lineWidth = 1;
        ctx.strokeRect(R.x + 0.5, R.y + 0.5, Math.max(R.w - 1.5, 0.5), ROW - 2);
      }
      var room = Math.floor((R.w - 6) / cw);
      if (room >= 3) {
        var s = names[R.i];
        if (s.length > room) s = s.slice(0, room - 2) + "..";
        ctx.fillStyle = "#111";
        ctx.fillText(s, R.x + 3, R.y + ROW / 2);
      }
    }
    ctx.globalAlpha = 1;
    document.getElementById("orient").textContent = st.icicle ? "flame" : "icicle";
    document.getElementById("reset").disabled = st.zoom === 0;
    if (cur[0] <= 0) {
      ctx.fillStyle = "#555";
      ctx.font = "14px system-ui, sans-serif";
      ctx.fillText("No " + WEIGHT_NAMES[st.weight] + " time in this profile.", 8, ROW / 2);
    }
  }
  function yOf(d) {
    return (st.icicle ? d : levels - 1 - d) * ROW;
  }
  function hit(ev) {
    var b = canvas.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
    var row = Math.floor(y / ROW), d = st.icicle ? row : levels - 1 - row;
    var list = rows[d];
    if (!list) return null;
    var lo = 0, hi = list.length - 1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1, R = list[mid];
      if (x < R.x) hi = mid - 1;
      else if (x >= R.x + R.w) lo = mid + 1;
      else return R;
    }
    return null;
  }

  // Numbers.
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return sig3(ns / 1e9) + " s";
    if (a >= 1e6) return sig3(ns / 1e6) + " ms";
    if (a >= 1e3) return sig3(ns / 1e3) + " µs";
    return Math.round(ns) + " ns";
  }
  function sig3(x) {
    var a = Math.abs(x);
    return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
  }
  function pct(part, whole) {
    return whole > 0 ? (100 * part / whole).toFixed(2) + "%" : "-";
  }

  // Tooltip.
  var tip = document.getElementById("tip");
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function tipRow(tb, label, value, share) {
    var tr = el("tr");
    tr.appendChild(el("th", label));
    tr.appendChild(el("td", value));
    tr.appendChild(el("td", share || ""));
    tb.appendChild(tr);
  }
  function showTip(i, ev) {
    tip.textContent = "";
    tip.appendChild(el("div", names[i], "name"));
    var tb = el("table"), o = i * NS;
    var on = val[o], run = val[o + 1], sl = val[o + 2], dk = val[o + 3], ot = val[o + 4];
    var blk = sl + dk + ot, wall = on + run + blk;
    if (diff) {
      var a = cur[i] * 1e9 / Math.max(D.duration, 1), b = curB[i] * 1e9 / Math.max(D.beforeDuration, 1);
      var wn = WEIGHT_NAMES[st.weight];
      tipRow(tb, "before", fmtDur(b) + "/s", wn);
      tipRow(tb, "after", fmtDur(a) + "/s", wn);
      tipRow(tb, "change", (a >= b ? "+" : "") + fmtDur(a - b) + "/s", b > 0 ? (a >= b ? "+" : "") + pct(a - b, b) : "new");
    }
    tipRow(tb, "wall", fmtDur(wall), pct(wall, weigh(val, 0, "wall")) + " of all wall time");
    tipRow(tb, "on-CPU", fmtDur(on), pct(on, wall) + " of the frame");
    tipRow(tb, "runnable", fmtDur(run), pct(run, wall) + " of the frame");
    tipRow(tb, "blocked", fmtDur(blk), pct(blk, wall) + " of the frame");
    if (blk > 0) {
      tipRow(tb, "  sleeping", fmtDur(sl), pct(sl, wall));
      tipRow(tb, "  disk", fmtDur(dk), pct(dk, wall));
      tipRow(tb, "  other", fmtDur(ot), pct(ot, wall));
    }
    tip.appendChild(tb);
    tip.appendChild(el("div", "click to zoom", "hint"));
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14, tw = tip.offsetWidth, th = tip.offsetHeight;
    if (x + tw > window.innerWidth - 4) x = Math.max(4, ev.clientX - tw - 14);
    if (y + th > window.innerHeight - 4) y = Math.max(4, ev.clientY - th - 14);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

  // Search.
  var search = document.getElementById("search"), matchEl = document.getElementById("match");
  function updateMatch() {
    var src = search.value;
    st.re = null;
    st.share = null;
    matchEl.className = "";
    if (src === "") {
      matchEl.textContent = "";
      return;
    }
    try {
      st.re = new RegExp(src);
    } catch (e) {
      matchEl.textContent = "invalid regular expression";
      matchEl.className = "bad";
      return;
    }
    // A frame's time counts once, at its outermost matching frame.
    var inMatch = new Uint8Array(N), sum = 0;
    for (var i = 0; i < N; i++) {
      matched[i] = st.re.test(names[i]) ? 1 : 0;
      var up = i > 0 && inMatch[parent[i]];
      inMatch[i] = up || matched[i] ? 1 : 0;
      if (matched[i] && !up) sum += cur[i];
    }
    st.share = cur[0] > 0 ? sum / cur[0] : 0;
    matchEl.textContent = "matched " + (100 * st.share).toFixed(2) + "% of " + WEIGHT_NAMES[st.weight] + " time (" + fmtDur(sum) + ")";
  }

  // Wiring.
  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      render();
    });
  }
  function zoomTo(i) {
    st.zoom = i;
    hover = -1;
    tip.hidden = true;
    render();
  }
  canvas.addEventListener("click", function (ev) {
    var R = hit(ev);
    if (R) zoomTo(R.i);
  });
  canvas.addEventListener("mousemove", function (ev) {
    var R = hit(ev), i = R ? R.i : -1;
    if (i !== hover) {
      hover = i;
      redraw();
    }
    if (R) showTip(R.i, ev);
    else tip.hidden = true;
  });
  canvas.addEventListener("mouseleave", function () {
    tip.hidden = true;
    hover = -1;
    redraw();
  });
  document.getElementById("reset").addEventListener("click", function () { zoomTo(0); });
  document.getElementById("orient").addEventListener("click", function () {
    st.icicle = !st.icicle;
    render();
  });
  var wb = document.querySelectorAll("#weights button");
  for (var b = 0; b < wb.length; b++) {
    wb[b].addEventListener("click", function (ev) {
      setWeight(ev.currentTarget.getAttribute("data-weight"));
      render();
    });
  }
  var timer = 0;
  search.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      updateMatch();
      render();
    }, 120);
  });
  search.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") {
      clearTimeout(timer);
      updateMatch();
      render();
    }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.target === search) return;
    if (ev.key === "Escape") zoomTo(0);
    else if (ev.key === "/") {
      ev.preventDefault();
      search.focus();
    }
  });
  window.addEventListener("resize", redraw);

  // Header, legend and notes.
  document.getElementById("title").textContent = D.title;
  document.getElementById("subtitle").textContent = D.subtitle;
  var legend = document.getElementById("legend");
  if (diff) {
    legend.appendChild(el("span", "", "sw grew"));
    legend.appendChild(document.createTextNode("grew "));
    legend.appendChild(el("span", "", "sw shrank"));
    legend.appendChild(document.createTextNode("shrank (time per second)"));
  } else {
    for (var k = 0; k < KINDS.length; k++) {
      var sw = el("span", "", "sw");
      sw.style.background = kindColor(k, 0.5);
      legend.appendChild(sw);
      legend.appendChild(document.createTextNode(KINDS[k].name + " "));
    }
  }
  var notes = ["Click a frame to zoom in, Esc or 'reset zoom' to zoom out; '/' to search."];
  if (D.dropped > 0) notes.push(D.dropped + " call paths narrower than " + (100 * D.minWidth).toPrecision(2) + "% of the total are not drawn: their time shows as their callers' own time.");
  if (D.truncated > 0) notes.push(D.truncated + " stacks deeper than the depth limit were cut.");
  if (diff) notes.push("Frames only in the first profile are not shown.");
  document.getElementById("note").textContent = notes.join(" ");

  setWeight(st.weight);
  render();

  // For tests and scripts: what is drawn, in CSS pixels relative to the canvas.
  window.wallprofFlame = {
    frames: function () {
      return rects.map(function (R) {
        return { name: names[R.i], depth: R.d, x: R.x, y: R.y, w: R.w, h: ROW - 1, ancestor: R.anc };
      });
    },
    width: function () { return canvas.clientWidth; },
    zoomed: function () { return names[st.zoom]; },
    matchShare: function () { return st.share; },
  };
})();
