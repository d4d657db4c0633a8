import sys, time
def burn_cpu_python_marker(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def main():
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        burn_cpu_python_marker(100000)
main()
