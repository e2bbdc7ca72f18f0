#include "streamthread.h"

static void *stream_thread_main(void *arg)
{
    struct stream_thread *t = arg;

    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->task && !t->stopping)
            pthread_cond_wait(&t->cond, &t->lock);
        if (!t->task)
            break;
        void *(*task)(void *) = t->task;
        void *task_arg = t->arg;
        pthread_mutex_unlock(&t->lock);
        task(task_arg);
        pthread_mutex_lock(&t->lock);
        t->task = NULL;
        t->busy = false;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

int stream_thread_start(struct stream_thread *t, void *(*task)(void *), void *arg)
{
    if (!t->alive) {
        int rc;
        *t = (struct stream_thread){0};
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        rc = pthread_create(&t->thread, NULL, stream_thread_main, t);
        if (rc != 0) {
            pthread_cond_destroy(&t->cond);
            pthread_mutex_destroy(&t->lock);
            return rc;
        }
        t->alive = true;
    }
    pthread_mutex_lock(&t->lock);
    t->task = task;
    t->arg = arg;
    t->busy = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    return 0;
}

void stream_thread_join(struct stream_thread *t)
{
    if (!t->alive)
        return;
    pthread_mutex_lock(&t->lock);
    while (t->busy)
        pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

void stream_thread_stop(struct stream_thread *t)
{
    if (!t->alive)
        return;
    stream_thread_join(t);
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    t->alive = false;
}
