/* sdmz-streamctl: create, update, release, list and inspect stream requests
 * on the local sdmz-proxy, through its control socket (control.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sdmz-streamctl [--socket PATH] [--key-file PATH] [--json] VERB [ARGS]\n"
            "  create  --id ID --side producer|consumer --channels N --listen ADDR:PORT\n"
            "          --connect ADDR:PORT --allow CIDR[,CIDR] [--rate BITS] [--buffer BYTES]\n"
            "          [--policy block|drop-oldest] [--record BYTES] [--max-conns N]\n"
            "          [--tls connect|listen --tls-peer NAME]\n"
            "  update  --id ID [--rate BITS] [--buffer BYTES] [--policy P] [--record BYTES]\n"
            "          [--allow CIDR[,CIDR]] [--max-conns N]\n"
            "  release --id ID\n"
            "  list\n"
            "  stats   [--id ID]\n"
            "Arguments may also be written key=value. Exit: 0 ok, 1 refused, 2 usage,\n"
            "3 the proxy is unreachable.\n");
}

static int make_nonce(char out[CONTROL_NONCE_HEX + 1])
{
    unsigned char raw[CONTROL_NONCE_HEX / 2];

    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

static void json_string(const char *s, size_t n, FILE *out)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            fputc('\\', out);
        fputc(s[i], out);
    }
    fputc('"', out);
}

static int is_number(const char *s, size_t n)
{
    int dots = 0;

    if (n == 0 || n > 18)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && i > 0 && ++dots == 1)
            continue;
        if (s[i] < '0' || s[i] > '9')
            return 0;
    }
    return s[n - 1] != '.';
}

/* "kind k=v k=v" -> {"kind": "kind", "k": v, ...} */
static void json_line(const char *line, FILE *out)
{
    size_t kind_len = strcspn(line, " ");
    const char *p = line + kind_len;

    fputs("{\"kind\": ", out);
    json_string(line, kind_len, out);
    while (*p == ' ') {
        const char *key = ++p, *eq;
        size_t len = strcspn(p, " ");

        p += len;
        eq = memchr(key, '=', len);
        if (!eq)
            continue;
        fputs(", ", out);
        json_string(key, (size_t)(eq - key), out);
        fputs(": ", out);
        if (is_number(eq + 1, (size_t)(p - eq - 1)))
            fwrite(eq + 1, 1, (size_t)(p - eq - 1), out);
        else
            json_string(eq + 1, (size_t)(p - eq - 1), out);
    }
    fputc('}', out);
}

static void print_json(const char *reply)
{
    const char *nl = strchr(reply, '\n');
    size_t first = nl ? (size_t)(nl - reply) : strlen(reply);
    int ok = !strncmp(reply, "ok", 2), n = 0;

    printf("{\"ok\": %s, \"message\": ", ok ? "true" : "false");
    json_string(reply, first, stdout);
    printf(", \"items\": [");
    for (const char *line = nl ? nl + 1 : ""; *line;) {
        char buf[CONTROL_MAX_LINE];
        size_t len = strcspn(line, "\n");
        if (len > 0 && len < sizeof buf) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            printf("%s\n  ", n++ ? "," : "");
            json_line(buf, stdout);
        }
        line += len + (line[len] == '\n');
    }
    printf("]}\n");
}

static int send_request(const char *socket_path, const char *message, char **reply)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t cap = 65536, used = 0, len = strlen(message);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ssize_t n;

    if (strlen(socket_path) >= sizeof addr.sun_path) {
        fprintf(stderr, "sdmz-streamctl: --socket: path too long\n");
        return -1;
    }
    strcpy(addr.sun_path, socket_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        fprintf(stderr, "sdmz-streamctl: %s: %s (is sdmz-proxy running?)\n", socket_path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (write(fd, message, len) != (ssize_t)len) {
        fprintf(stderr, "sdmz-streamctl: %s: write: %s\n", socket_path, strerror(errno));
        close(fd);
        return -1;
    }
    *reply = malloc(cap + 1);
    if (!*reply) {
        close(fd);
        return -1;
    }
    while ((n = read(fd, *reply + used, cap - used)) > 0) {
        used += (size_t)n;
        if (used == cap) {
            char *bigger = realloc(*reply, cap * 2 + 1);
            if (!bigger)
                break;
            *reply = bigger;
            cap *= 2;
        }
    }
    close(fd);
    (*reply)[used] = '\0';
    if (used == 0) {
        fprintf(stderr, "sdmz-streamctl: %s: no reply\n", socket_path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *socket_path = "/run/sdmz-proxy/control.sock";
    const char *key_path = "/etc/sdmz-proxy/control.key";
    char *args[CONTROL_MAX_ARGS], argbuf[CONTROL_MAX_ARGS][1100];
    char message[CONTROL_MAX_LINE + 1], nonce[CONTROL_NONCE_HEX + 1], err[300];
    char *reply = NULL;
    const char *verb = NULL;
    struct control_key key;
    int nargs = 0, json = 0, i, rc;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if ((!strcmp(argv[i], "--socket") || !strcmp(argv[i], "--key-file")) && !verb) {
            if (i + 1 == argc) {
                fprintf(stderr, "sdmz-streamctl: %s needs a value\n", argv[i]);
                return EXIT_USAGE;
            }
            *(argv[i][2] == 's' ? &socket_path : &key_path) = argv[i + 1];
            i++;
        } else if (!verb) {
            verb = argv[i];
        } else if (nargs == CONTROL_MAX_ARGS) {
            fprintf(stderr, "sdmz-streamctl: too many arguments\n");
            return EXIT_USAGE;
        } else if (!strncmp(argv[i], "--", 2)) {
            if (i + 1 == argc || strlen(argv[i]) + strlen(argv[i + 1]) > 1000) {
                fprintf(stderr, "sdmz-streamctl: %s needs a value\n", argv[i]);
                return EXIT_USAGE;
            }
            snprintf(argbuf[nargs], sizeof argbuf[nargs], "%s=%s", argv[i] + 2, argv[i + 1]);
            args[nargs] = argbuf[nargs];
            nargs++;
            i++;
        } else if (strchr(argv[i], '=') && strlen(argv[i]) < 1000) {
            args[nargs++] = argv[i];
        } else {
            fprintf(stderr, "sdmz-streamctl: '%s': expected --key value or key=value\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!verb) {
        usage(stderr);
        return EXIT_USAGE;
    }
    for (i = 0; i < nargs; i++) {
        if (strpbrk(args[i], " \t\r\n")) {
            fprintf(stderr, "sdmz-streamctl: '%s': values cannot contain spaces\n", args[i]);
            return EXIT_USAGE;
        }
    }
    if (control_key_load(key_path, &key, err, sizeof err) < 0) {
        fprintf(stderr, "sdmz-streamctl: %s\n", err);
        return EXIT_USAGE;
    }
    if (make_nonce(nonce) < 0 ||
        control_sign(&key, time(NULL), nonce, verb, nargs, args, message, sizeof message) < 0) {
        fprintf(stderr, "sdmz-streamctl: the request does not fit in %d bytes\n",
                CONTROL_MAX_LINE);
        return EXIT_USAGE;
    }
    if (send_request(socket_path, message, &reply) < 0) {
        free(reply);
        return EXIT_UNREACHABLE;
    }
    rc = strncmp(reply, "ok", 2) ? EXIT_REFUSED : 0;
    if (json)
        print_json(reply);
    else if (rc)
        fprintf(stderr, "sdmz-streamctl: %s", reply);
    else
        fputs(reply, stdout);
    free(reply);
    return rc;
}
