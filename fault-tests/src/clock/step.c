/* Steps the wall clock of the process it is preloaded into by the whole seconds
 * written in the file $DLOCK_CLOCK_STEP_FILE ("+7200", "-7200"), read at every call.
 *
 * A libfaketime for programs linked with jemalloc (Debian's redis-server), which
 * libfaketime cannot load into: jemalloc reads the clock while libfaketime is still
 * initialising (libfaketime issue #130). It allocates nothing and resolves nothing:
 * the true time comes from the clock_gettime system call itself. Only the wall clock
 * is stepped; monotonic clocks pass through untouched. Waits on absolute
 * CLOCK_REALTIME deadlines (pthread_cond_timedwait on its default clock,
 * sem_timedwait, clock_nanosleep with TIMER_ABSTIME) are not adjusted: after a
 * step ahead such a wait ends at once, after a step back it lasts the step longer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long step_seconds(void) {
    const char *path = getenv("DLOCK_CLOCK_STEP_FILE");
    if (!path) return 0;
    int saved = errno; /* reading the time must not change errno */
    long long step = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            step = strtoll(buf, NULL, 10);
        }
    }
    errno = saved;
    return step;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, clock, ts);
    if (r == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        ts->tv_sec += step_seconds();
    }
    return (int)r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    if (tz) memset(tz, 0, sizeof(struct timezone)); /* UTC, no DST, as the kernel's */
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
