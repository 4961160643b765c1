/* Times N clears of LEN bytes: mode 0 rep stosb, 1 rep stosq, 2 a loop of 8-byte stores. Usage: reptest N LEN MODE */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
static char buf[1<<16];
static long ns(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
int main(int c,char**v){
  long n=atol(v[1]); long len=atol(v[2]); int mode=atoi(v[3]);
  long t0=ns();
  for(long i=0;i<n;i++){
    void*d=buf; long cnt=len;
    if(mode==0){ asm volatile("rep stosb":"+D"(d),"+c"(cnt):"a"(0):"memory"); }
    else if(mode==1){ long q=len/8; asm volatile("rep stosq":"+D"(d),"+c"(q):"a"(0):"memory"); }
    else { for(long j=0;j<len;j+=8) *(volatile long*)(buf+j)=0; }
  }
  long t1=ns();
  printf("mode %d len %ld: %.1f ns per op\n",mode,len,(double)(t1-t0)/n);
}
