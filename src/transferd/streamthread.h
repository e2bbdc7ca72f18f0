/* Threads that outlive one transfer. A data connection's thread is created
 * once and then handed each file's work in turn, so a tree of small files
 * does not pay a thread creation and a join per stream per file. Used like
 * pthread_create() and pthread_join(); a zeroed struct is a stopped thread. */
#ifndef SDMZ_STREAMTHREAD_H
#define SDMZ_STREAMTHREAD_H

#include <pthread.h>
#include <stdbool.h>

struct stream_thread {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *(*task)(void *);  /* the work handed over, NULL when idle */
    void *arg;
    bool alive;
    bool busy;              /* handed a task that has not finished */
    bool stopping;
};

/* Hands task(arg) to the thread, creating it if it is not running. 0, or
 * the error number pthread_create() gave. */
int stream_thread_start(struct stream_thread *t, void *(*task)(void *), void *arg);
/* Waits until the task handed over last has returned. */
void stream_thread_join(struct stream_thread *t);
/* Ends an idle thread (no-op on a stopped one). */
void stream_thread_stop(struct stream_thread *t);

#endif
