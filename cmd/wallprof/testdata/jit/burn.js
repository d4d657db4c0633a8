function burnCpuNodeMarker(n) {
  let s = 0;
  for (let i = 0; i < n; i++) { s += Math.sqrt(i) * (i % 7); }
  return s;
}
// The last argument: node -e passes its arguments from process.argv[1].
const end = Date.now() + parseFloat(process.argv[process.argv.length - 1]) * 1000;
let t = 0;
while (Date.now() < end) { t += burnCpuNodeMarker(100000); }
console.log(t > 0 ? "ok" : "");
