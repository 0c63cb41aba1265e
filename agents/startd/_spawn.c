/* The starter's fast spawn: a child sharing the startd's memory (no copy of its page tables) that
 * joins the job's cgroups, starts a session, sets up the standard streams, enters the working
 * directory, takes the job's account, closes every other descriptor and execs the job.
 *
 * Why not subprocess.Popen: Popen forks (copies the startd's page tables, and every page the
 * startd writes afterwards faults) whenever the job runs under another account, because glibc's
 * setuid() signals every thread of the process, which a child sharing the parent's memory must
 * not do. Here the child changes its ids with the raw system calls, which change only the calling
 * task, as HTCondor's own "fast clone" of its daemons does. And the job joins its cgroups itself
 * before its exec, so it is born in them without the startd's thread moving there and back.
 *
 * Why not vfork: a vfork suspends the calling thread until the child's exec, and the child's
 * cgroup migrations and exec were half of the startd loop's time per job. On x86-64 and aarch64
 * the child is a clone(CLONE_VM) on a stack of its own, and the startd goes on at once; it learns
 * the outcome from a close-on-exec pipe (EOF: the exec happened; (stage, errno): the step that
 * failed), which its event loop watches (Launch.fileno). The price is that the child runs beside
 * the startd's threads in the same memory, so it may touch nothing they use: it runs only raw
 * system calls (inline, never a libc wrapper, which would set the calling thread's errno) on a
 * spec the parent copied for it and frees only after the exec or the child's exit. Elsewhere the
 * child is a vfork and the same code runs while the caller waits.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define KERNEL_SIGSET_BYTES (64 / 8) /* the kernel's sigset_t: 64 signals (MIPS, with 128, is not a target) */

#if defined(__x86_64__) || defined(__aarch64__)
#define CONCURRENT_CHILD 1
#define CHILD_STACK_BYTES (64 * 1024)

/* A system call without libc: the result, or -errno. */
static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
#else
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
#endif
}
#else
#define CONCURRENT_CHILD 0
/* Other architectures: libc's syscall() in a vfork child (the caller waits, so its errno is
 * free to use). */
static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
    long r = syscall(n, a, b, c, d, e, f);
    return r == -1 ? -errno : r;
}
#endif

#define raw1(n, a) raw6((n), (long)(a), 0, 0, 0, 0, 0)
#define raw2(n, a, b) raw6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define raw3(n, a, b, c) raw6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define raw4(n, a, b, c, d) raw6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

enum stage { STAGE_CGROUP = 1, STAGE_SETSID, STAGE_STREAMS, STAGE_CHDIR, STAGE_IDS, STAGE_WAIT, STAGE_EXEC };

/* Everything the child reads: copied by the parent, freed when the child no longer uses it. */
struct spec {
    char *executable;
    char **argv;
    char **envp;
    char *cwd;                    /* NULL: stay */
    int fds[3];                   /* the job's stdin, stdout, stderr */
    long uid, gid;                /* -1: keep the startd's */
    unsigned int *groups;         /* (gid_t: see ids) */
    Py_ssize_t ngroups;
    unsigned int *joins;          /* descriptors of the files to write "0" into to join the job's groups */
    Py_ssize_t njoins;
    int errfd;
    int wait_fd;                  /* -1, or a pidfd: the exec waits until that process has exited */
    long parent;                  /* the startd's pid (a waiting child gives up if it is gone) */
    long max_fd;                  /* where closing one by one stops, without close_range */
};

static void report(int errfd, int stage, long err)
{
    int msg[2] = {stage, (int)err};
    long n;
    do {
        n = raw3(SYS_write, errfd, msg, sizeof msg);
    } while (n == -EINTR);
}

static void close_from(int low, long high, long max_fd)
{
    /* close [low, high]; close_range where the kernel has it (5.9), else one by one */
    if (low > high)
        return;
    if (raw3(SYS_close_range, (unsigned)low, (unsigned)(high > 0x7fffffff ? 0x7fffffff : high), 0) == 0)
        return;
    for (long fd = low; fd <= high && fd < max_fd; fd++)
        raw1(SYS_close, fd);
}

static int __attribute__((noreturn)) child(void *arg)
{
    const struct spec *s = arg;
    int stage;
    long r;

    /* Every signal goes back to its default disposition before any can be delivered here (a
     * Python handler must never run in this child), the ignored ones too: a job must not inherit
     * a SIGHUP that nohup ignored for the startd, nor what the startd's own parent ignored. An
     * all-zero kernel sigaction is SIG_DFL with no flags, whatever the architecture's field
     * order. (Every signal is blocked until then: the parent blocked them around the clone.) */
    static const unsigned long dfl[8];
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP)
            raw4(SYS_rt_sigaction, sig, dfl, NULL, KERNEL_SIGSET_BYTES);
    }

    stage = STAGE_CGROUP;
    for (Py_ssize_t i = 0; i < s->njoins; i++) {
        /* "0": the writer itself (the calling thread in a v1 tasks file, which is this whole
         * single-threaded child; the process in a v2 cgroup.procs). The files were opened by
         * the startd, once for the group's life: no path is looked up here per job. */
        r = raw3(SYS_write, s->joins[i], "0", 1);
        if (r != 1) {
            r = r < 0 ? r : -EIO;
            goto fail;
        }
    }

    stage = STAGE_SETSID;
    r = raw1(SYS_setsid, 0);
    if (r < 0)
        goto fail;

    stage = STAGE_STREAMS;
    int fds[3] = {s->fds[0], s->fds[1], s->fds[2]};
    for (int i = 0; i < 3; i++) {
        if (fds[i] < 3) {  /* out of the way of the dup3s below, which then never see fd == i */
            r = raw3(SYS_fcntl, fds[i], F_DUPFD, 3);
            if (r < 0)
                goto fail;
            fds[i] = (int)r;
        }
    }
    for (int i = 0; i < 3; i++) {
        r = raw3(SYS_dup3, fds[i], i, 0);
        if (r < 0)
            goto fail;
    }

    stage = STAGE_CHDIR;
    if (s->cwd != NULL) {
        r = raw1(SYS_chdir, s->cwd);
        if (r < 0)
            goto fail;
    }

    stage = STAGE_IDS;
    if (s->uid >= 0) {
        if ((r = raw2(SYS_setgroups, s->ngroups, s->groups)) < 0)
            goto fail;
        if ((r = raw3(SYS_setresgid, s->gid, s->gid, s->gid)) < 0)
            goto fail;
        if ((r = raw3(SYS_setresuid, s->uid, s->uid, s->uid)) < 0)
            goto fail;
        if (raw1(SYS_getuid, 0) != s->uid || raw1(SYS_geteuid, 0) != s->uid) {
            r = -EPERM;
            goto fail;
        }
    }

    if (s->wait_fd >= 0) {
        /* A successor: everything is ready, and the exec waits for the job before it on the
         * claim to exit, woken by the kernel (its pidfd) without a turn of the startd's loop.
         * Meanwhile the startd may cancel it with SIGKILL, which takes it before any exec. It
         * dies with the startd rather than start a job nobody watches: the death signal is set
         * after the ids (whose change would clear it) and cleared before the exec (which would
         * keep it for the job); a startd gone before it was set shows as another parent. */
        stage = STAGE_WAIT;
        if ((r = raw2(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL)) < 0)
            goto fail;
        if (raw1(SYS_getppid, 0) != s->parent)
            for (;;)
                raw1(SYS_exit_group, 127);
        struct pollfd pfd = {.fd = s->wait_fd, .events = POLLIN};
        do {
            r = raw6(SYS_ppoll, (long)&pfd, 1, 0, 0, KERNEL_SIGSET_BYTES, 0);
        } while (r == -EINTR || r == 0);
        if (r < 0)
            goto fail;
        if ((r = raw2(SYS_prctl, PR_SET_PDEATHSIG, 0)) < 0)
            goto fail;
    }

    close_from(3, s->errfd - 1, s->max_fd);
    close_from(s->errfd + 1, 0x7fffffff, s->max_fd);

    static const unsigned long none[8];
    raw4(SYS_rt_sigprocmask, SIG_SETMASK, none, NULL, KERNEL_SIGSET_BYTES);

    stage = STAGE_EXEC;
    r = raw3(SYS_execve, s->executable, s->argv, s->envp);
fail:
    report(s->errfd, stage, -r);
    for (;;)
        raw1(SYS_exit_group, 127);
}

#if !CONCURRENT_CHILD
/* The vfork in a frame of its own which the child never returns from (it execs or exits), so
 * nothing of the caller's frame can be clobbered by the child's run on the shared stack. */
static pid_t __attribute__((noinline)) vfork_child(struct spec *s)
{
    pid_t pid = vfork();
    if (pid == 0)
        child(s);
    return pid;
}
#endif

/* ------------------------------------------------------------------ the spec */

static void free_strings(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p != NULL; p++)
        PyMem_RawFree(*p);
    PyMem_RawFree(v);
}

static char *copy_bytes(PyObject *item, const char *what, Py_ssize_t i)
{
    char *data;
    Py_ssize_t len;
    if (!PyBytes_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s: item %zd is not bytes", what, i);
        return NULL;
    }
    if (PyBytes_AsStringAndSize(item, &data, &len) < 0)
        return NULL;
    if ((Py_ssize_t)strlen(data) != len) {
        PyErr_Format(PyExc_ValueError, "%s: item %zd holds a NUL byte", what, i);
        return NULL;
    }
    char *copy = PyMem_RawMalloc((size_t)len + 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, data, (size_t)len + 1);
    return copy;
}

/* A NULL-terminated copy of a sequence of bytes objects. */
static char **strings(PyObject *seq, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    char **v = PyMem_RawCalloc((size_t)n + 1, sizeof(char *));
    if (v == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = copy_bytes(PySequence_Fast_GET_ITEM(fast, i), what, i);
        if (v[i] == NULL) {
            Py_DECREF(fast);
            free_strings(v);
            return NULL;
        }
    }
    Py_DECREF(fast);
    return v;
}

static void free_spec(struct spec *s)
{
    PyMem_RawFree(s->executable);
    PyMem_RawFree(s->cwd);
    free_strings(s->argv);
    free_strings(s->envp);
    PyMem_RawFree(s->joins);
    PyMem_RawFree(s->groups);
    memset(s, 0, sizeof *s);
}

_Static_assert(sizeof(gid_t) == sizeof(unsigned int), "a group id is an unsigned int");

/* The integers of the sequence ``seq`` (each from 0 to ``max``) as a new array in ``*out`` (which
 * free_spec frees, also after a failure) of ``*n`` numbers; 0, or -1 with an exception set. */
static int ids(PyObject *seq, const char *what, long max, unsigned int **out, Py_ssize_t *n)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *out = PyMem_RawCalloc((size_t)*n + 1, sizeof(unsigned int));
    if (*out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v < 0 || v > max) {
            Py_DECREF(fast);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: %ld is out of range", what, v);
            return -1;
        }
        (*out)[i] = (unsigned int)v;
    }
    Py_DECREF(fast);
    return 0;
}

/* Fill ``s`` from the Python arguments; 0, or -1 with an exception set (``s`` then holds what was
 * copied so far, for free_spec). */
static int fill_spec(struct spec *s, PyObject *args)
{
    PyObject *exe_o, *argv_o, *env_o, *cwd_o, *fds_o, *groups_o, *joins_o;
    long uid, gid;
    int wait_fd = -1;

    if (!PyArg_ParseTuple(args, "OOOOOllOO|i:spawn", &exe_o, &argv_o, &env_o, &cwd_o, &fds_o, &uid, &gid,
                          &groups_o, &joins_o, &wait_fd))
        return -1;
    if (wait_fd < -1) {
        PyErr_SetString(PyExc_ValueError, "spawn: wait_fd must be a descriptor, or -1");
        return -1;
    }
#if !CONCURRENT_CHILD
    if (wait_fd >= 0) {  /* a vfork child that waits would hold its caller as long */
        PyErr_SetString(PyExc_ValueError, "spawn: wait_fd needs a child beside the caller (CONCURRENT)");
        return -1;
    }
#endif
    s->wait_fd = wait_fd;
    s->parent = (long)getpid();
    if (cwd_o != Py_None && !PyBytes_Check(cwd_o)) {
        PyErr_SetString(PyExc_TypeError, "spawn: cwd must be bytes or None");
        return -1;
    }
    if (!PyArg_ParseTuple(fds_o, "iii:spawn fds", &s->fds[0], &s->fds[1], &s->fds[2]))
        return -1;
    if (uid < -1 || gid < -1 || (uid >= 0) != (gid >= 0)) {
        PyErr_SetString(PyExc_ValueError, "spawn: uid and gid must both be ids, or both -1");
        return -1;
    }
    s->uid = uid;
    s->gid = gid;
    if ((s->executable = copy_bytes(exe_o, "spawn executable", 0)) == NULL)
        return -1;
    if (cwd_o != Py_None && (s->cwd = copy_bytes(cwd_o, "spawn cwd", 0)) == NULL)
        return -1;
    if ((s->argv = strings(argv_o, "spawn argv")) == NULL)
        return -1;
    if ((s->envp = strings(env_o, "spawn env")) == NULL)
        return -1;

    if (ids(joins_o, "spawn joins", INT_MAX, &s->joins, &s->njoins) < 0)
        return -1;
    if (ids(groups_o, "spawn groups", (gid_t)-1 > LONG_MAX ? LONG_MAX : (long)(gid_t)-1 - 1, &s->groups, &s->ngroups) < 0)
        return -1;
    long max_fd = sysconf(_SC_OPEN_MAX);
    s->max_fd = max_fd < 0 || max_fd > 65536 ? 65536 : max_fd;
    return 0;
}

/* ------------------------------------------------------------------ Launch */

static PyObject *SpawnError;

typedef struct {
    PyObject_HEAD
    pid_t pid;
    int readfd;          /* the pipe's read end; -1 once the outcome is known */
    int stage, err;      /* the failed step, once known (stage 0: the exec happened) */
    struct spec spec;    /* the child may read it until the outcome is known */
    void *stack;
} Launch;

/* Read the outcome (blocking when ``block``); 1 known, 0 not yet, -1 with errno. The spec and
 * the stack are freed once the child uses them no longer: after its exec, or its exit. */
static int settle(Launch *self, int block)
{
    if (self->readfd < 0)
        return 1;
    int msg[2] = {0, 0};
    ssize_t got = -1;
    Py_BEGIN_ALLOW_THREADS
    struct pollfd pfd = {.fd = self->readfd, .events = POLLIN};
    for (;;) {
        int ready = poll(&pfd, 1, block ? -1 : 0);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0) {
            errno = EAGAIN;
            break;
        }
        if (ready < 0)
            break;
        got = read(self->readfd, msg, sizeof msg);
        if (got < 0 && errno == EINTR)
            continue;
        break;
    }
    if (got > 0) {  /* it failed and exits: reap it before its stack goes */
        int status;
        while (waitpid(self->pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    Py_END_ALLOW_THREADS
    if (got < 0) {
        if (errno == EAGAIN)
            return 0;
        return -1;
    }
    close(self->readfd);
    self->readfd = -1;
    if (got > 0) {
        self->stage = msg[0];
        self->err = msg[1];
    }
    free_spec(&self->spec);
    PyMem_RawFree(self->stack);
    self->stack = NULL;
    return 1;
}

static const char *stage_name(int stage)
{
    switch (stage) {
    case STAGE_CGROUP: return "cgroup";
    case STAGE_SETSID: return "setsid";
    case STAGE_STREAMS: return "streams";
    case STAGE_CHDIR: return "chdir";
    case STAGE_IDS: return "ids";
    case STAGE_WAIT: return "wait";
    case STAGE_EXEC: return "exec";
    default: return "unknown";
    }
}

static void Launch_dealloc(Launch *self)
{
    /* Never free what the child may still read: wait for its exec or exit. */
    settle(self, 1);
    if (self->readfd >= 0)
        close(self->readfd);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Launch_fileno(Launch *self, PyObject *Py_UNUSED(ignored))
{
    if (self->readfd < 0) {
        PyErr_SetString(PyExc_ValueError, "the launch's outcome is known: it has no descriptor");
        return NULL;
    }
    return PyLong_FromLong(self->readfd);
}

static PyObject *outcome(Launch *self, int block)
{
    /* The executable and cwd named in the error: copied before the spec is freed. */
    PyObject *exe = self->spec.executable ? PyBytes_FromString(self->spec.executable) : NULL;
    PyObject *cwd = self->spec.cwd ? PyBytes_FromString(self->spec.cwd) : NULL;
    if (PyErr_Occurred()) {
        Py_XDECREF(exe);
        Py_XDECREF(cwd);
        return NULL;
    }
    PyObject *result = NULL;
    int known = settle(self, block);
    if (known < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (known == 0) {
        result = Py_NewRef(Py_None);
    } else if (self->stage == 0) {
        result = PyLong_FromLong((long)self->pid);
    } else {
        PyObject *name = self->stage == STAGE_EXEC ? exe : self->stage == STAGE_CHDIR ? cwd : NULL;
        PyObject *exc_args = Py_BuildValue("(sisO)", stage_name(self->stage), self->err, strerror(self->err),
                                           name ? name : Py_None);
        if (exc_args != NULL) {
            PyErr_SetObject(SpawnError, exc_args);
            Py_DECREF(exc_args);
        }
    }
    Py_XDECREF(exe);
    Py_XDECREF(cwd);
    return result;
}

static PyObject *Launch_result(Launch *self, PyObject *Py_UNUSED(ignored))
{
    return outcome(self, 1);
}

static PyObject *Launch_poll(Launch *self, PyObject *Py_UNUSED(ignored))
{
    return outcome(self, 0);
}

static PyObject *Launch_get_pid(Launch *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong((long)self->pid);
}

static PyMethodDef Launch_methods[] = {
    {"fileno", (PyCFunction)Launch_fileno, METH_NOARGS,
     "The descriptor that becomes readable when the outcome is known (until it is read)."},
    {"result", (PyCFunction)Launch_result, METH_NOARGS,
     "Wait for the outcome: the job's pid once it execs, or SpawnError(stage, errno, strerror, "
     "filename) when the child failed before (it has been reaped then)."},
    {"poll", (PyCFunction)Launch_poll, METH_NOARGS,
     "As result(), but None at once while the outcome is not known."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Launch_getset[] = {
    {"pid", (getter)Launch_get_pid, NULL, "The child's pid (the job's, once it has exec'd).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_spawn.Launch",
    .tp_basicsize = sizeof(Launch),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A job's first process between its start and its exec (see spawn).",
    .tp_dealloc = (destructor)Launch_dealloc,
    .tp_methods = Launch_methods,
    .tp_getset = Launch_getset,
};

PyDoc_STRVAR(spawn_doc,
"spawn(executable, argv, env, cwd, fds, uid, gid, groups, joins, wait_fd=-1) -> Launch\n\n"
"Start a job's first process: in it, join the cgroups by writing \"0\" into each descriptor of ``joins``\n"
"(open v1 tasks or v2 cgroup.procs files), setsid, make ``fds`` (3 descriptors) its stdin, stdout and stderr, chdir to ``cwd``\n"
"(None: stay), take ``uid``/``gid``/``groups`` (uid -1: keep the caller's ids), close every\n"
"other descriptor and exec ``executable`` with ``argv`` and ``env`` (bytes). Returns at once\n"
"(where the child is concurrent) a Launch whose result() is the job's pid after its exec, or\n"
"raises SpawnError(stage, errno, strerror, filename) when the child failed before it; stage is\n"
"one of cgroup, setsid, streams, chdir, ids, wait, exec. ``fds`` must stay open until the outcome\n"
"is known. ``wait_fd``: a pidfd; the child does everything but the exec, then waits until that\n"
"process has exited (a SIGKILL meanwhile cancels it; it dies with the caller's process).");

static PyObject *spawn(PyObject *Py_UNUSED(self), PyObject *args)
{
    Launch *launch = PyObject_New(Launch, &LaunchType);
    if (launch == NULL)
        return NULL;
    launch->pid = -1;
    launch->readfd = -1;
    launch->stage = launch->err = 0;
    launch->stack = NULL;
    memset(&launch->spec, 0, sizeof launch->spec);
    struct spec *s = &launch->spec;
    int pipefd[2] = {-1, -1};

    if (fill_spec(s, args) < 0)
        goto error;
#if CONCURRENT_CHILD
    launch->stack = PyMem_RawMalloc(CHILD_STACK_BYTES);
    if (launch->stack == NULL) {
        PyErr_NoMemory();
        goto error;
    }
#endif
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto error;
    }
    s->errfd = pipefd[1];

    pid_t pid;
    int spawn_errno = 0;
    Py_BEGIN_ALLOW_THREADS
    sigset_t all, old;
    sigfillset(&all);
    /* No signal may reach the child while it shares this process's memory and still has the
     * startd's handlers; the child unblocks them itself before its exec, after resetting them. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
#if CONCURRENT_CHILD
    /* The stack grows down on both targets: its top, 16-byte aligned. */
    char *top = (char *)launch->stack + CHILD_STACK_BYTES;
    top = (char *)((uintptr_t)top & ~(uintptr_t)15);
    pid = clone(child, top, CLONE_VM | SIGCHLD, s);
#else
    pid = vfork_child(s);
#endif
    spawn_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    Py_END_ALLOW_THREADS
    close(pipefd[1]);  /* (s->errfd stays: the child may not have read it yet) */
    if (pid < 0) {
        close(pipefd[0]);
        errno = spawn_errno;
        PyErr_SetFromErrno(PyExc_OSError);
        goto error;
    }
    launch->pid = pid;
    launch->readfd = pipefd[0];
    return (PyObject *)launch;

error:
    free_spec(s);
    PyMem_RawFree(launch->stack);
    launch->stack = NULL;
    Py_DECREF(launch);
    return NULL;
}

static PyMethodDef methods[] = {
    {"spawn", spawn, METH_VARARGS, spawn_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_spawn", "The starter's fast spawn (see spawn).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__spawn(void)
{
    if (PyType_Ready(&LaunchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    SpawnError = PyErr_NewExceptionWithDoc("_spawn.SpawnError",
        "The job's process failed before its exec: args (stage, errno, strerror, filename).",
        NULL, NULL);
    if (SpawnError == NULL || PyModule_AddObjectRef(m, "SpawnError", SpawnError) < 0
        || PyModule_AddObjectRef(m, "Launch", (PyObject *)&LaunchType) < 0
        || PyModule_AddIntConstant(m, "CONCURRENT", CONCURRENT_CHILD) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
