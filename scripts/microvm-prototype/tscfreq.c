#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC_RAW,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){double t0=now();unsigned long long c0=__rdtsc();struct timespec s={0,500000000};nanosleep(&s,0);double t1=now();unsigned long long c1=__rdtsc();printf("%.0f\n",(c1-c0)/(t1-t0)/1000.0);return 0;}
