/* The starter's fast spawn: vfork, then in the child (before the job's exec) join the job's
 * cgroups, start a session, set up the standard streams, enter the working directory, take the
 * job's account, close every other descriptor, exec.
 *
 * Why not subprocess.Popen: Popen forks (copies the startd's page tables, and every page the
 * startd writes afterwards faults) whenever the job runs under another account, because glibc's
 * setuid() signals every thread of the process, which a vfork child sharing the parent's memory
 * must not do. Here the child changes its ids with the raw system calls, which change only the
 * calling task: a vfork is safe, as in HTCondor's own "fast clone" of its daemons. And the job
 * joins its cgroups itself between the vfork and its exec, so it is born in them without the
 * startd's thread moving there and back (two cgroup migrations per hierarchy instead of one).
 *
 * The child runs only system calls on data prepared by the parent: no allocation, no Python.
 * Failures travel back on a close-on-exec pipe as (stage, errno).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define KERNEL_SIGSET_BYTES (64 / 8) /* the kernel's sigset_t: 64 signals (MIPS, with 128, is not a target) */

enum stage { STAGE_CGROUP = 1, STAGE_SETSID, STAGE_STREAMS, STAGE_CHDIR, STAGE_IDS, STAGE_EXEC };

struct spec {
    const char *executable;
    char **argv;
    char **envp;
    const char *cwd;              /* NULL: stay */
    int fds[3];                   /* the job's stdin, stdout, stderr */
    long uid, gid;                /* -1: keep the startd's */
    gid_t *groups;
    Py_ssize_t ngroups;
    const char **procs;           /* cgroup.procs files to join */
    Py_ssize_t nprocs;
    int errfd;
};

static void report(int errfd, int stage, int err)
{
    int msg[2] = {stage, err};
    ssize_t n;
    do {
        n = write(errfd, msg, sizeof msg);
    } while (n < 0 && errno == EINTR);
}

static void close_from(int low, int high)
{
    /* close [low, high]; close_range where the kernel has it (5.9), else one by one */
    if (low > high)
        return;
    if (syscall(SYS_close_range, (unsigned)low, (unsigned)high, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (long fd = low; fd <= high && fd < max; fd++)
        close((int)fd);
}

static void __attribute__((noreturn)) child(const struct spec *s)
{
    int stage, err;

    /* Every signal goes back to its default disposition before any can be delivered here (a
     * Python handler must never run in this child), the ignored ones too: a job must not inherit
     * a SIGHUP that nohup ignored for the startd, nor what the startd's own parent ignored.
     * The raw call, because glibc's sigaction refuses its two internal signals; an all-zero
     * kernel sigaction is SIG_DFL with no flags, whatever the architecture's field order. */
    static const unsigned long dfl[8];
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, dfl, NULL, KERNEL_SIGSET_BYTES);
    }

    stage = STAGE_CGROUP;
    for (Py_ssize_t i = 0; i < s->nprocs; i++) {
        int fd = open(s->procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            goto fail;
        /* "0": the writing process itself (cgroup v1 and v2 alike) */
        ssize_t n = write(fd, "0", 1);
        int saved = errno;
        close(fd);
        if (n != 1) {
            errno = n < 0 ? saved : EIO;
            goto fail;
        }
    }

    stage = STAGE_SETSID;
    if (setsid() < 0)
        goto fail;

    stage = STAGE_STREAMS;
    int fds[3] = {s->fds[0], s->fds[1], s->fds[2]};
    for (int i = 0; i < 3; i++) {
        if (fds[i] < 3) {  /* out of the way of the dup2s below */
            fds[i] = fcntl(fds[i], F_DUPFD, 3);
            if (fds[i] < 0)
                goto fail;
        }
    }
    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0)
            goto fail;

    stage = STAGE_CHDIR;
    if (s->cwd != NULL && chdir(s->cwd) < 0)
        goto fail;

    stage = STAGE_IDS;
    if (s->uid >= 0) {
        if (syscall(SYS_setgroups, (size_t)s->ngroups, s->groups) != 0)
            goto fail;
        if (syscall(SYS_setresgid, (gid_t)s->gid, (gid_t)s->gid, (gid_t)s->gid) != 0)
            goto fail;
        if (syscall(SYS_setresuid, (uid_t)s->uid, (uid_t)s->uid, (uid_t)s->uid) != 0)
            goto fail;
        if (getuid() != (uid_t)s->uid || geteuid() != (uid_t)s->uid) {
            errno = EPERM;
            goto fail;
        }
    }

    close_from(3, s->errfd - 1);
    close_from(s->errfd + 1, 0x7fffffff);

    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    stage = STAGE_EXEC;
    execve(s->executable, s->argv, s->envp);
fail:
    err = errno;
    report(s->errfd, stage, err);
    _exit(127);
}

/* The vfork in a frame of its own which the child never returns from (it execs or exits), so
 * nothing of the caller's frame can be clobbered by the child's run on the shared stack. */
static pid_t __attribute__((noinline)) start_child(const struct spec *s)
{
    pid_t pid = vfork();
    if (pid == 0)
        child(s);
    return pid;
}

/* ------------------------------------------------------------------ argument conversion */

static void free_strings(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p != NULL; p++)
        PyMem_Free(*p);
    PyMem_Free(v);
}

/* A NULL-terminated copy of a sequence of bytes objects. */
static char **strings(PyObject *seq, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    char **v = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    if (v == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        char *data;
        Py_ssize_t len;
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: item %zd is not bytes", what, i);
            goto error;
        }
        if (PyBytes_AsStringAndSize(item, &data, &len) < 0)
            goto error;
        if ((Py_ssize_t)strlen(data) != len) {
            PyErr_Format(PyExc_ValueError, "%s: item %zd holds a NUL byte", what, i);
            goto error;
        }
        v[i] = PyMem_Malloc((size_t)len + 1);
        if (v[i] == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        memcpy(v[i], data, (size_t)len + 1);
    }
    Py_DECREF(fast);
    return v;
error:
    Py_DECREF(fast);
    free_strings(v);
    return NULL;
}

static const char *stage_name(int stage)
{
    switch (stage) {
    case STAGE_CGROUP: return "cgroup";
    case STAGE_SETSID: return "setsid";
    case STAGE_STREAMS: return "streams";
    case STAGE_CHDIR: return "chdir";
    case STAGE_IDS: return "ids";
    case STAGE_EXEC: return "exec";
    default: return "unknown";
    }
}

PyDoc_STRVAR(spawn_doc,
"spawn(executable, argv, env, cwd, fds, uid, gid, groups, procs) -> pid\n\n"
"Start a job: vfork; in the child join the cgroups whose cgroup.procs files are listed in\n"
"``procs``, setsid, make ``fds`` (3 descriptors) its stdin, stdout and stderr, chdir to ``cwd``\n"
"(None: stay), take ``uid``/``gid``/``groups`` (uid -1: keep the caller's ids), close every\n"
"other descriptor and exec ``executable`` with ``argv`` and ``env`` (bytes). Returns the pid\n"
"of the running job. Raises SpawnError(stage, errno) when the child failed before its exec\n"
"(it has then been reaped); stage is one of cgroup, setsid, streams, chdir, ids, exec.");

static PyObject *SpawnError;

static PyObject *spawn(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *exe_o, *argv_o, *env_o, *cwd_o, *fds_o, *groups_o, *procs_o;
    long uid, gid;
    struct spec s;
    memset(&s, 0, sizeof s);
    char **procs = NULL;
    PyObject *result = NULL;
    int pipefd[2] = {-1, -1};

    if (!PyArg_ParseTuple(args, "OOOOOllOO:spawn", &exe_o, &argv_o, &env_o, &cwd_o, &fds_o, &uid, &gid,
                          &groups_o, &procs_o))
        return NULL;
    if (!PyBytes_Check(exe_o) || (cwd_o != Py_None && !PyBytes_Check(cwd_o))) {
        PyErr_SetString(PyExc_TypeError, "spawn: executable and cwd must be bytes (cwd may be None)");
        return NULL;
    }
    if (!PyArg_ParseTuple(fds_o, "iii:spawn fds", &s.fds[0], &s.fds[1], &s.fds[2]))
        return NULL;
    if (uid < -1 || gid < -1 || (uid >= 0) != (gid >= 0)) {
        PyErr_SetString(PyExc_ValueError, "spawn: uid and gid must both be ids, or both -1");
        return NULL;
    }
    s.executable = PyBytes_AS_STRING(exe_o);
    s.cwd = cwd_o == Py_None ? NULL : PyBytes_AS_STRING(cwd_o);
    s.uid = uid;
    s.gid = gid;

    s.argv = strings(argv_o, "spawn argv");
    if (s.argv == NULL)
        goto done;
    s.envp = strings(env_o, "spawn env");
    if (s.envp == NULL)
        goto done;
    procs = strings(procs_o, "spawn procs");
    if (procs == NULL)
        goto done;
    s.procs = (const char **)procs;
    while (procs[s.nprocs] != NULL)
        s.nprocs++;

    PyObject *gfast = PySequence_Fast(groups_o, "spawn groups");
    if (gfast == NULL)
        goto done;
    s.ngroups = PySequence_Fast_GET_SIZE(gfast);
    s.groups = PyMem_Calloc((size_t)s.ngroups + 1, sizeof(gid_t));
    if (s.groups == NULL) {
        Py_DECREF(gfast);
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < s.ngroups; i++) {
        long g = PyLong_AsLong(PySequence_Fast_GET_ITEM(gfast, i));
        if (g < 0) {
            Py_DECREF(gfast);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "spawn: a group id is negative");
            goto done;
        }
        s.groups[i] = (gid_t)g;
    }
    Py_DECREF(gfast);

    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    s.errfd = pipefd[1];

    pid_t pid;
    int spawn_errno = 0;
    int msg[2] = {0, 0};
    ssize_t got;
    Py_BEGIN_ALLOW_THREADS
    sigset_t all, old;
    sigfillset(&all);
    /* No signal may reach the child while it shares this thread's memory and still has the
     * startd's handlers; the child restores its own mask before the exec. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = start_child(&s);
    spawn_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pipefd[1]);
    pipefd[1] = -1;
    if (pid > 0) {
        do {
            got = read(pipefd[0], msg, sizeof msg);
        } while (got < 0 && errno == EINTR);
        if (got > 0) {
            int status;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        }
    } else {
        got = 0;
    }
    Py_END_ALLOW_THREADS

    if (pid < 0) {
        errno = spawn_errno;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    if (got > 0) {
        PyObject *exc_args = Py_BuildValue("(sisy)", stage_name(msg[0]), msg[1], strerror(msg[1]),
                                           msg[0] == STAGE_EXEC ? s.executable : (msg[0] == STAGE_CHDIR && s.cwd ? s.cwd : ""));
        if (exc_args != NULL) {
            PyErr_SetObject(SpawnError, exc_args);
            Py_DECREF(exc_args);
        }
        goto done;
    }
    result = PyLong_FromLong((long)pid);

done:
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    free_strings(s.argv);
    free_strings(s.envp);
    free_strings(procs);
    PyMem_Free(s.groups);
    return result;
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
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    SpawnError = PyErr_NewExceptionWithDoc("_spawn.SpawnError",
        "The job's process failed before its exec: args (stage, errno, strerror, filename).",
        NULL, NULL);
    if (SpawnError == NULL || PyModule_AddObjectRef(m, "SpawnError", SpawnError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
