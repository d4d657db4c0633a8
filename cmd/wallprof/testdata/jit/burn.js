function burnCpuNodeMarker(n) {
  let s = 0;
  for (let i = 0; i < n; i++) { s += Math.sqrt(i) * (i % 7); }
  return s;
}
const end = Date.now() + parseFloat(process.argv[2]) * 1000;
let t = 0;
while (Date.now() < end) { t += burnCpuNodeMarker(100000); }
console.log(t > 0 ? "ok" : "");
