public class BurnJava {
    static double burnCpuJavaMarker(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) { s += Math.sqrt(i) * (i % 7); }
        return s;
    }
    public static void main(String[] args) {
        long end = System.currentTimeMillis() + (long) (Double.parseDouble(args[0]) * 1000);
        double t = 0;
        while (System.currentTimeMillis() < end) { t += burnCpuJavaMarker(100000); }
        System.out.println(t > 0 ? "ok" : "");
    }
}
