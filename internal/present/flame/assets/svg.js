// wallprof SVG flame graph: click to zoom, Search to highlight. Frames are
// <g class="f" data-x data-w data-d> with the name on their title's first line.
(function () {
  "use strict";
  var svg = document.documentElement, NS = "http://www.w3.org/2000/svg";
  var W = +svg.getAttribute("width"), PAD = 10, CHARW = 7, inner = W - 2 * PAD;
  var frames = [].slice.call(document.querySelectorAll(".f")).map(function (g) {
    return {
      g: g, rect: g.querySelector("rect"), text: g.querySelector("text"),
      name: g.querySelector("title").textContent.split("\n")[0],
      x: +g.getAttribute("data-x"), w: +g.getAttribute("data-w"), d: +g.getAttribute("data-d"),
      fill: g.querySelector("rect").getAttribute("fill"),
    };
  });
  var reset = document.getElementById("reset"), details = document.getElementById("details");
  var matched = document.getElementById("matched"), EPS = 1e-9;

  function fit(f, px) {
    var room = Math.floor((px - 6) / CHARW), s = f.name;
    if (room < 3) return "";
    return s.length <= room ? s : s.slice(0, room - 2) + "..";
  }
  function place(f, x, w) {
    var px = w * inner;
    f.rect.setAttribute("x", (PAD + x * inner).toFixed(1));
    f.rect.setAttribute("width", Math.max(px - 0.5, 0.1).toFixed(1));
    f.text.setAttribute("x", (PAD + x * inner + 3).toFixed(1));
    f.text.textContent = fit(f, px);
  }
  function zoom(z) {
    frames.forEach(function (f) {
      var inside = f.x >= z.x - EPS && f.x + f.w <= z.x + z.w + EPS && f.d >= z.d;
      var above = f.d < z.d && f.x <= z.x + EPS && f.x + f.w >= z.x + z.w - EPS;
      f.g.style.display = inside || above ? "" : "none";
      f.g.style.opacity = above ? "0.6" : "";
      if (inside) place(f, (f.x - z.x) / z.w, f.w / z.w);
      else if (above) place(f, 0, 1);
    });
    reset.setAttribute("visibility", z.d === 0 ? "hidden" : "visible");
  }
  frames.forEach(function (f) {
    f.g.addEventListener("click", function () { zoom(f); });
    f.g.addEventListener("mouseover", function () { details.textContent = f.g.querySelector("title").textContent.split("\n").slice(0, 2).join(": "); });
    f.g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  reset.addEventListener("click", function () { if (frames.length) zoom(frames[0]); });
  document.getElementById("search").addEventListener("click", function () {
    var src = window.prompt("Search frames by regular expression (empty: clear)", "");
    if (src === null) return;
    var re = null;
    if (src !== "") {
      try { re = new RegExp(src); } catch (e) { matched.textContent = "invalid regular expression"; return; }
    }
    var spans = [];
    frames.forEach(function (f) {
      var m = re !== null && re.test(f.name);
      f.rect.setAttribute("fill", m ? "rgb(110,215,60)" : f.fill);
      if (m) spans.push([f.x, f.x + f.w]);
    });
    // The union of the matched spans is the matched share of the total.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var sum = 0, end = -1;
    spans.forEach(function (s) {
      if (s[0] >= end) { sum += s[1] - s[0]; end = s[1]; }
      else if (s[1] > end) { sum += s[1] - end; end = s[1]; }
    });
    matched.textContent = re === null ? "" : "Matched: " + (100 * sum).toFixed(2) + "%";
  });
})();
