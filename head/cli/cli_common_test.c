/*
 * cli_common_test: unit tests of what hvsubmit and hvctl decide without a head: the command line,
 * the checks on the files a job ships (a real ELF copied from /bin/true, a script, a file that is
 * not executable, a directory, a missing path), --env, the elastic options (accepted and refused
 * values), exit statuses of finished jobs, the elastic and blacklist display formats, node
 * names for drain, the table printer, hvctl status's summary and the actors' steps (the JSON
 * writer itself: cli_json_test). Run all cases, or one by name: cli_common_test table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "hv_check.h"
#include "mem.h"

/* Splits a command line on spaces into a static argv (argv[0] = "hvsubmit"). */
static int split_args(const char *line, char *store, size_t storelen, char **argv, int maxargs) {
    snprintf(store, storelen, "hvsubmit %s", line);
    int argc = 0;
    for (char *tok = strtok(store, " "); tok != NULL && argc < maxargs - 1;
         tok = strtok(NULL, " ")) {
        argv[argc++] = tok;
    }
    argv[argc] = NULL;
    return argc;
}

/* Parses a command line (split_args) and runs one step of hvsubmit on it (check_files,
 * prepare): the step returns want and its message holds has1 and has2 (each may be NULL). */
typedef hv_err (*submit_step_fn)(hv_cli_submit_opts_t *o, char *err, size_t errlen);
static void submit_step(const char *line, submit_step_fn step, hv_err want, const char *has1,
                        const char *has2) {
    char store[4096], err[HV_CLI_ERR_LEN] = "";
    char *argv[16];
    hv_cli_submit_opts_t o;
    int argc = split_args(line, store, sizeof(store), argv, 16);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_RC(step(&o, err, sizeof(err)), want);
    if (has1 != NULL) {
        CHECK_HAS(err, has1);
    }
    if (has2 != NULL) {
        CHECK_HAS(err, has2);
    }
    hv_cli_submit_opts_fini(&o);
}

static hv_err check_files(hv_cli_submit_opts_t *o, char *err, size_t errlen) {
    return hv_cli_submit_check_files(o, err, errlen);
}

/* ---- command line --------------------------------------------------------------------------- */

static void test_parse_basic(void) {
    char store[512], err[HV_CLI_ERR_LEN];
    char *argv[64];
    int argc = split_args("-np 4 --min-np 2 --max-np 8 --max-resets 3 --slots-per-host 2 "
                          "--env A=1 -e B=x=y --file data.txt -f cfg/x.yaml --timeout 30 "
                          "train.bin --lr 0.1 -np 3",
                          store, sizeof(store), argv, 64);
    hv_cli_submit_opts_t o;
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.np, 4);
    CHECK_EQ(o.np_set, 1);
    CHECK_EQ(o.min_np, 2);
    CHECK_EQ(o.max_np, 8);
    CHECK_EQ(o.max_resets, 3);
    CHECK_EQ(o.slots_per_host, 2);
    CHECK_EQ(o.timeout_s, 30);
    CHECK_EQ(o.nenv, 2);
    if (o.nenv == 2) {
        CHECK_STR(o.env[0].key, "A");
        CHECK_STR(o.env[0].value, "1");
        CHECK_STR(o.env[1].key, "B");
        CHECK_STR(o.env[1].value, "x=y");
    }
    CHECK_EQ(o.nfiles, 2);
    if (o.nfiles == 2) {
        CHECK_STR(o.files[0], "data.txt");
        CHECK_STR(o.files[1], "cfg/x.yaml");
    }
    CHECK_STR(o.binary, "train.bin");
    /* Everything after the binary is the program's, even what looks like our options. */
    CHECK_EQ(o.nargs, 4);
    if (o.nargs == 4) {
        CHECK_STR(o.args[0], "--lr");
        CHECK_STR(o.args[1], "0.1");
        CHECK_STR(o.args[2], "-np");
        CHECK_STR(o.args[3], "3");
    }
    CHECK(o.head == NULL && o.name == NULL && !o.detach && !o.quiet && !o.help);
    CHECK(o.elastic && o.max_resets_set);
    CHECK(!o.cooldown_set && o.check_every == 0 && o.elastic_timeout_s == 0);
    hv_cli_submit_opts_fini(&o);

    /* --max-resets 0 is kept as given; without --min-np/--max-np a job has a fixed size. */
    argc = split_args("-np 4 --max-resets=0 --max-np=4 t", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK(o.elastic);
    CHECK_EQ(o.max_resets, 0);
    CHECK_EQ(o.max_resets_set, 1); /* 0 given on purpose: fail at the first reset */
    hv_cli_submit_opts_fini(&o);
    argc = split_args("-np 4 t", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK(!o.elastic && !o.max_resets_set && !o.cooldown_set);
    hv_cli_submit_opts_fini(&o);
}

static void test_parse_elastic(void) {
    char store[512], err[HV_CLI_ERR_LEN];
    char *argv[64];
    hv_cli_submit_opts_t o;
    int argc = split_args("--min-np 2 --elastic-timeout 300 --check-every 10 "
                          "--blacklist-cooldown 30:1800 --max-resets 5 train.bin --check-every 1",
                          store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.elastic, 1);
    CHECK_EQ(o.min_np, 2);
    CHECK_EQ(o.max_np, 0);
    CHECK_EQ(o.np_set, 0);
    CHECK_EQ(o.elastic_timeout_s, 300);
    CHECK_EQ(o.check_every, 10);
    CHECK_EQ(o.cooldown_min_s, 30);
    CHECK_EQ(o.cooldown_max_s, 1800);
    CHECK_EQ(o.cooldown_set, 1);
    CHECK_EQ(o.max_resets, 5);
    CHECK_EQ(o.max_resets_set, 1);
    CHECK_EQ(o.nargs, 2); /* the program's own --check-every */
    hv_cli_submit_opts_fini(&o);

    /* The "=" forms, the bounds, and 0:0 (no blacklisting). */
    argc = split_args("--max-np=8 -np=8 --elastic-timeout=604800 --check-every=1000000 "
                      "--blacklist-cooldown=0:0 --max-resets=1000000 t",
                      store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.elastic, 1);
    CHECK_EQ(o.max_np, 8);
    CHECK_EQ(o.np, 8);
    CHECK_EQ(o.elastic_timeout_s, 604800);
    CHECK_EQ(o.check_every, 1000000);
    CHECK_EQ(o.cooldown_min_s, 0);
    CHECK_EQ(o.cooldown_max_s, 0);
    CHECK_EQ(o.cooldown_set, 1);
    CHECK_EQ(o.max_resets, 1000000);
    hv_cli_submit_opts_fini(&o);

    /* MIN = MAX: a fixed cooldown. */
    argc = split_args("--max-np 3 --blacklist-cooldown 604800:604800 t", store, sizeof(store), argv,
                      64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.cooldown_min_s, 604800);
    CHECK_EQ(o.cooldown_max_s, 604800);
    hv_cli_submit_opts_fini(&o);
}

static void test_parse_forms(void) {
    char store[512], err[HV_CLI_ERR_LEN];
    char *argv[64];
    int argc = split_args("--np=2 --head=node1:7001 --name=resnet --detach -q -v ./a.out", store,
                          sizeof(store), argv, 64);
    hv_cli_submit_opts_t o;
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.np, 2);
    CHECK_STR(o.head, "node1:7001");
    CHECK_STR(o.name, "resnet");
    CHECK(o.detach && o.quiet && o.verbose);
    CHECK_STR(o.binary, "./a.out");
    CHECK_EQ(o.nargs, 0);
    hv_cli_submit_opts_fini(&o);

    /* No -np: np stays 0 and unset (every free slot). "--" ends the options. */
    argc = split_args("--max-np 4 -- -odd-name x", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.np, 0);
    CHECK_EQ(o.np_set, 0);
    CHECK_EQ(o.max_np, 4);
    CHECK_STR(o.binary, "-odd-name");
    CHECK_EQ(o.nargs, 1);
    hv_cli_submit_opts_fini(&o);

    /* A later --env for the same name wins. */
    argc = split_args("--env A=1 --env B=2 --env A=3 t", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.nenv, 2);
    if (o.nenv == 2) {
        CHECK_STR(o.env[0].key, "A");
        CHECK_STR(o.env[0].value, "3");
    }
    hv_cli_submit_opts_fini(&o);

    /* --grow: elastic, starts at the epoch-0 size, --max-np defaults to the largest size, and the
     * workers get the schedule. */
    argc = split_args("--grow 0:2,3:4,6:8 t", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK(o.elastic);
    CHECK_EQ(o.np, 2);
    CHECK_EQ(o.np_set, 1);
    CHECK_EQ(o.max_np, 8);
    CHECK_EQ(o.ngrow, 3);
    CHECK_EQ(o.nenv, 1);
    if (o.nenv == 1) {
        CHECK_STR(o.env[0].key, "HV_GROW_SCHEDULE");
        CHECK_STR(o.env[0].value, "0:2,3:4,6:8");
    }
    hv_cli_submit_opts_fini(&o);
    /* A schedule that starts later takes -np before it; an explicit --max-np stays. */
    argc = split_args("-np 1 --max-np 6 --grow 2:3 t", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.np, 1);
    CHECK_EQ(o.max_np, 6);
    hv_cli_submit_opts_fini(&o);

    argc = split_args("--help", store, sizeof(store), argv, 64);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK(o.help);
    hv_cli_submit_opts_fini(&o);
}

static void test_parse_errors(void) {
    static const struct {
        const char *line;
        const char *msg; /* expected in the error */
    } cases[] = {
        {"-np 0 t", "-np 0: a job needs at least one worker"},
        {"-np 2 --min-np 3 t", "--min-np 3 is more than -np 2"},
        {"-np 9 --max-np 8 t", "-np 9 is more than --max-np 8"},
        {"--min-np 5 --max-np 4 t", "--min-np 5 is more than --max-np 4"},
        {"--min-np 0 t", "--min-np '0': expected a whole number of at least 1"},
        {"-np four t", "--np 'four': expected a whole number"},
        {"-np -1 t", "--np '-1'"},
        {"-np 99999999999 t", "expected a whole number"},
        {"--bogus t", "unknown option '--bogus'"},
        {"-np", "option '-np' needs a value"},
        {"-np 2", "no program given"},
        {"", "no program given"},
        {"--env NOEQUALS t", "--env 'NOEQUALS': expected KEY=VALUE"},
        {"--env =v t", "--env '=v': the name before '=' is empty"},
        {"--detach=yes t", "option '--detach' takes no value"},
        {"--head nohostport t", "bad head address 'nohostport'"},
        {"--timeout 0 t", "--timeout '0'"},
        /* elastic options */
        {"--min-np 1 --check-every 0 t",
         "--check-every '0': expected a number of commits from 1 to 1000000"},
        {"--min-np 1 --check-every 1000001 t", "--check-every '1000001'"},
        {"--min-np 1 --check-every often t", "--check-every 'often'"},
        {"--max-np 4 --max-resets 1000001 t",
         "--max-resets '1000001': expected a whole number from 0 to 1000000"},
        {"--max-np 4 --max-resets -1 t", "--max-resets '-1'"},
        {"--min-np 2 --elastic-timeout 0 t",
         "--elastic-timeout '0': expected seconds from 1 to 604800"},
        {"--min-np 2 --elastic-timeout 10m t", "--elastic-timeout '10m'"},
        {"--min-np 2 --blacklist-cooldown 60 t",
         "--blacklist-cooldown '60': expected MIN:MAX in seconds, e.g. 60:3600"},
        {"--min-np 2 --blacklist-cooldown 600:60 t",
         "--blacklist-cooldown '600:60': MIN 600 is more than MAX 60"},
        {"--min-np 2 --blacklist-cooldown 0:60 t",
         "--blacklist-cooldown '0:60': a MIN of 0 turns blacklisting off; give 0:0"},
        {"--min-np 2 --blacklist-cooldown a:b t",
         "--blacklist-cooldown 'a:b': MIN and MAX are whole seconds from 0 to 604800"},
        {"--min-np 2 --blacklist-cooldown 1:604801 t", "--blacklist-cooldown '1:604801'"},
        {"--min-np 2 --blacklist-cooldown :5 t", "--blacklist-cooldown ':5'"},
        {"--min-np 2 --blacklist-cooldown 5: t", "--blacklist-cooldown '5:'"},
        {"--min-np 2 --blacklist-cooldown 1:2:3 t", "--blacklist-cooldown '1:2:3'"},
        {"--min-np 2 --blacklist-cooldown t", "--blacklist-cooldown 't': expected MIN:MAX"},
        {"--max-resets 3 t", "--max-resets is for elastic jobs: give --min-np and/or --max-np"},
        {"-np 2 --check-every 5 t", "--check-every is for elastic jobs"},
        {"--elastic-timeout 60 t", "--elastic-timeout is for elastic jobs"},
        {"--blacklist-cooldown 0:0 t", "--blacklist-cooldown is for elastic jobs"},
        {"--min-np 3 -np 2 --max-np 8 t", "--min-np 3 is more than -np 2"},
        /* growth schedules */
        {"--grow 0:2,30x4 t", "--grow '0:2,30x4': step 2 '30x4'"},
        {"--grow 10:2,5:4 t", "epochs must increase"},
        {"--grow 5:2,10:4 t", "--grow '5:2,10:4' starts at epoch 5: give -np"},
        {"-np 3 --grow 0:2,10:4 t",
         "-np 3 and --grow '0:2,10:4' disagree: the schedule starts at 2"},
        {"--max-np 4 --grow 0:2,10:8 t", "--grow: 8 workers at epoch 10 is outside"},
        {"--min-np 3 --grow 0:2,10:8 t", "--grow: 2 workers at epoch 0 is outside"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char store[512], err[HV_CLI_ERR_LEN];
        char *argv[64];
        err[0] = '\0';
        int argc = split_args(cases[i].line, store, sizeof(store), argv, 64);
        hv_cli_submit_opts_t o;
        memset(&o, 0, sizeof(o));
        hv_err rc = hv_cli_submit_parse(argc, argv, &o, err, sizeof(err));
        if (rc != HV_EINVAL) {
            fprintf(stderr, "case '%s': rc = %s, want HV_EINVAL\n", cases[i].line, hv_errname(rc));
            hv_check_failures++;
            hv_cli_submit_opts_fini(&o);
            continue;
        }
        if (strstr(err, cases[i].msg) == NULL) {
            fprintf(stderr, "case '%s': err = \"%s\", want it to contain \"%s\"\n", cases[i].line,
                    err, cases[i].msg);
            hv_check_failures++;
        }
    }
}

static void test_env(void) {
    char err[HV_CLI_ERR_LEN];
    hv_cli_kv_t kv;
    CHECK_RC(hv_cli_parse_env("EMPTY=", &kv, err, sizeof(err)), HV_OK);
    CHECK_STR(kv.key, "EMPTY");
    CHECK_STR(kv.value, "");
    hv_cli_kv_fini(&kv);
    CHECK_RC(hv_cli_parse_env("URL=a=b&c=d", &kv, err, sizeof(err)), HV_OK);
    CHECK_STR(kv.key, "URL");
    CHECK_STR(kv.value, "a=b&c=d");
    hv_cli_kv_fini(&kv);
    CHECK_RC(hv_cli_parse_env("NOEQ", &kv, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "expected KEY=VALUE");
    CHECK_RC(hv_cli_parse_env("=v", &kv, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "empty");
    CHECK_RC(hv_cli_parse_env("A B=1", &kv, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "whitespace");
}

static void test_head_addr(void) {
    char err[HV_CLI_ERR_LEN];
    unsetenv("HV_HEAD");
    CHECK_STR(hv_cli_head_addr(NULL), "127.0.0.1:7000");
    setenv("HV_HEAD", "10.0.0.5:7100", 1);
    CHECK_STR(hv_cli_head_addr(NULL), "10.0.0.5:7100");
    CHECK_STR(hv_cli_head_addr("h:1"), "h:1");
    setenv("HV_HEAD", "", 1);
    CHECK_STR(hv_cli_head_addr(NULL), "127.0.0.1:7000");
    unsetenv("HV_HEAD");
    CHECK_RC(hv_cli_check_head_addr("127.0.0.1:7000", err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_check_head_addr("[::1]:7000", err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_check_head_addr("localhost", err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "expected HOST:PORT");
    CHECK_RC(hv_cli_check_head_addr("h:99999", err, sizeof(err)), HV_EINVAL);
    CHECK_STR(hv_cli_basename("/a/b/train.bin"), "train.bin");
    CHECK_STR(hv_cli_basename("train.bin"), "train.bin");
}

/* ---- file checks ---------------------------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void) {
    if (tmpdir[0] != '\0') {
        return;
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/hv-cli-test-XXXXXX", base && base[0] ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
        exit(1);
    }
}

/* Writes a file under tmpdir; path receives its full name. */
static void put_file(const char *name, const void *data, size_t len, mode_t mode, char *path,
                     size_t pathlen) {
    snprintf(path, pathlen, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    chmod(path, mode);
}

/* Copies /bin/true (a real ELF executable) to name under tmpdir. */
static void put_elf(const char *name, mode_t mode, char *path, size_t pathlen) {
    FILE *in = fopen("/bin/true", "rb");
    if (in == NULL) {
        fprintf(stderr, "cannot open /bin/true: %s\n", strerror(errno));
        exit(1);
    }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    put_file(name, buf, n, mode, path, pathlen);
}

static void test_check_binary(void) {
    char err[HV_CLI_ERR_LEN], path[512];
    make_tmpdir();

    put_elf("true.bin", 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_OK);

    put_elf("noexec.bin", 0644, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "is not executable (chmod +x");
    CHECK_HAS(err, path);

    static const char script[] = "#!/usr/bin/env python3\nprint('hi')\n";
    put_file("train.py", script, sizeof(script) - 1, 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "is a script, not an ELF executable");
    CHECK_HAS(err, path);

    static const char text[] = "PK\x03\x04 zip, not a program";
    put_file("notelf.bin", text, sizeof(text) - 1, 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "is not an ELF executable");

    put_file("empty.bin", "", 0, 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "is not an ELF executable");

    CHECK_RC(hv_cli_check_binary(tmpdir, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "is a directory");
    CHECK_HAS(err, tmpdir);

    snprintf(path, sizeof(path), "%s/missing.bin", tmpdir);
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_ENOTFOUND);
    CHECK_HAS(err, "no such file");
    CHECK_HAS(err, path);

    CHECK_RC(hv_cli_check_binary("/dev/null", err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "not a regular file");

    if (geteuid() != 0) { /* root reads anything: the case cannot be built */
        put_elf("unreadable.bin", 0311, path, sizeof(path));
        CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EPERM);
        CHECK_HAS(err, "cannot read");
    }
}

/* A 64-bit little-endian x86-64 PIE header with one program header right after it. */
static void elf64(unsigned char *b, size_t size) {
    memset(b, 0, size);
    memcpy(b,
           "\x7f"
           "ELF",
           4);
    b[4] = 2;   /* ELFCLASS64 */
    b[5] = 1;   /* little endian */
    b[6] = 1;   /* EV_CURRENT */
    b[16] = 3;  /* ET_DYN */
    b[18] = 62; /* EM_X86_64 */
    b[20] = 1;  /* e_version */
    b[32] = 64; /* e_phoff */
    b[52] = 64; /* e_ehsize */
    b[54] = 56; /* e_phentsize */
    b[56] = 1;  /* e_phnum */
}

static void test_elf_header(void) {
    char err[HV_CLI_ERR_LEN];
    unsigned char b[256];
    elf64(b, sizeof(b));
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_OK);
    b[16] = 2; /* ET_EXEC */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_OK);

    /* Only the magic: refused, whatever follows. */
    static const unsigned char magic_only[] = "\x7f"
                                              "ELF junk that is not a header at all....";
    CHECK_RC(hv_cli_elf_check_header(magic_only, sizeof(magic_only) - 1, err, sizeof(err)),
             HV_EINVAL);
    CHECK_HAS(err, "not a valid ELF file: unknown class");
    CHECK_RC(hv_cli_elf_check_header((const unsigned char *)"\x7f"
                                                            "EL",
                                     3, err, sizeof(err)),
             HV_EINVAL);
    CHECK_HAS(err, "does not start with \\x7fELF");
    CHECK_RC(hv_cli_elf_check_header(NULL, 0, err, sizeof(err)), HV_EINVAL);

    /* Truncated after the identification bytes. */
    CHECK_RC(hv_cli_elf_check_header(b, 40, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "truncated ELF file: 40 bytes, shorter than its 64-byte header");

    elf64(b, sizeof(b));
    b[5] = 3;
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "unknown byte order 3");

    elf64(b, sizeof(b));
    b[16] = 1; /* ET_REL */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "relocatable object file (.o), not a linked program");
    b[16] = 4; /* ET_CORE */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "core dump");

    elf64(b, sizeof(b));
    b[18] = 0x34; /* 0x1234: no such machine */
    b[19] = 0x12;
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "unknown machine 4660");
    b[18] = 183; /* AArch64: known, accepted (the nodes may not be this host's machine) */
    b[19] = 0;
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_OK);
    CHECK_STR(hv_cli_elf_machine_name(183), "AArch64");
    CHECK(hv_cli_elf_machine_name(4660) == NULL);

    elf64(b, sizeof(b));
    b[56] = 0; /* no program headers */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "without program headers");
    elf64(b, sizeof(b));
    b[56] = 4; /* 4 x 56 bytes at 64 do not fit in 256 */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "lie outside the file's 256 bytes");
    elf64(b, sizeof(b));
    memset(b + 32, 0xff, 8); /* e_phoff near 2^64: no overflow */
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "lie outside");
    elf64(b, sizeof(b));
    b[54] = 40;
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "program header entries of 40 bytes");
    elf64(b, sizeof(b));
    b[20] = 2;
    CHECK_RC(hv_cli_elf_check_header(b, sizeof(b), err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "e_version 2");

    /* 32-bit big-endian (e.g. MIPS): a 52-byte header, fields in big-endian order. */
    unsigned char c[128];
    memset(c, 0, sizeof(c));
    memcpy(c,
           "\x7f"
           "ELF",
           4);
    c[4] = 1;
    c[5] = 2;
    c[6] = 1;
    c[17] = 2;  /* ET_EXEC */
    c[19] = 8;  /* EM_MIPS */
    c[23] = 1;  /* e_version */
    c[31] = 52; /* e_phoff */
    c[41] = 52; /* e_ehsize */
    c[43] = 32; /* e_phentsize */
    c[45] = 2;  /* e_phnum */
    CHECK_RC(hv_cli_elf_check_header(c, sizeof(c), err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_elf_check_header(c, 100, err, sizeof(err)), HV_EINVAL); /* 52+64 > 100 */

    /* The prefix form: the header from the first 64 bytes, the table against the file size. */
    elf64(b, sizeof(b));
    CHECK_RC(hv_cli_elf_check_prefix(b, 64, 4096, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_elf_check_prefix(b, 64, 100, err, sizeof(err)), HV_EINVAL);

    /* Every prefix of a good header is refused cleanly (no read past len). */
    for (size_t n = 0; n < 120; n++) {
        unsigned char *p = hv_malloc(n ? n : 1);
        memcpy(p, b, n);
        CHECK_RC(hv_cli_elf_check_header(p, n, err, sizeof(err)), HV_EINVAL);
        hv_free(p);
    }
    CHECK_RC(hv_cli_elf_check_header(b, 120, err, sizeof(err)), HV_OK);

    /* Through the file check: a file that only starts with \x7fELF names the file. */
    char path[512];
    make_tmpdir();
    put_file("fake.bin",
             "\x7f"
             "ELF"
             "not really",
             14, 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, path);
    CHECK_HAS(err, "is not a valid ELF file");
    put_file("obj.o", (const char *)b, 0, 0755, path, sizeof(path));
    b[16] = 1;
    put_file("obj.o", (const char *)b, sizeof(b), 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "obj.o is a relocatable object file (.o)");
}

static void test_exit_codes(void) {
    /* Distinct, and none of them is a common program status (1, 2) or a signal (>128). */
    const int codes[] = {HV_CLI_EXIT_USAGE,       HV_CLI_EXIT_DATAERR,  HV_CLI_EXIT_NOINPUT,
                         HV_CLI_EXIT_UNAVAILABLE, HV_CLI_EXIT_SOFTWARE, HV_CLI_EXIT_IOERR,
                         HV_CLI_EXIT_TEMPFAIL,    HV_CLI_EXIT_NOPERM};
    const int want[] = {64, 65, 66, 69, 70, 74, 75, 77};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        CHECK_EQ(codes[i], want[i]);
    }
    CHECK_EQ(hv_cli_exit_for_local(HV_OK), 0);
    CHECK_EQ(hv_cli_exit_for_local(HV_ENOTFOUND), 66);
    CHECK_EQ(hv_cli_exit_for_local(HV_EPERM), 66);
    CHECK_EQ(hv_cli_exit_for_local(HV_EINVAL), 65);
    CHECK_EQ(hv_cli_exit_for_local(HV_EIO), 74);
    CHECK_EQ(hv_cli_exit_for_local(HV_ENOMEM), 70);

    /* --head-timeout, else the lease + 30 s (10 s lease from a head that does not say). */
    hv_cli_submit_opts_t o;
    memset(&o, 0, sizeof(o));
    CHECK(hv_cli_head_wait_ms(o.head_timeout_set, o.head_timeout_s, 2000) == 32000);
    CHECK(hv_cli_head_wait_ms(o.head_timeout_set, o.head_timeout_s, 0) == 40000);
    char *argv[] = {"hvsubmit", "--head-timeout", "5", "prog", NULL};
    char err[HV_CLI_ERR_LEN];
    CHECK_RC(hv_cli_submit_parse(4, argv, &o, err, sizeof(err)), HV_OK);
    CHECK(hv_cli_head_wait_ms(o.head_timeout_set, o.head_timeout_s, 2000) == 5000);
    hv_cli_submit_opts_fini(&o);
    char *bad[] = {"hvsubmit", "--head-timeout", "0", "prog", NULL};
    CHECK_RC(hv_cli_submit_parse(4, bad, &o, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "--head-timeout '0': expected seconds from 1 to 86400");
    char *ver[] = {"hvsubmit", "--version", NULL};
    CHECK_RC(hv_cli_submit_parse(2, ver, &o, err, sizeof(err)), HV_OK);
    CHECK(o.version);
    hv_cli_submit_opts_fini(&o);
}

/* hvsubmit -- python3.12 train.py: refused before any upload only when every alive node reports
 * its interpreters (label hv.python) and none has it; unknown (an agent without the label, no
 * node alive) or a path is left to the nodes. */
static void test_interp_missing(void) {
    Hvpb__V1__KeyValue kv[3], *kvp[3][1];
    Hvpb__V1__NodeInfo info[3];
    Hvpb__V1__NodeView nv[3];
    Hvpb__V1__NodeView *np[3] = {&nv[0], &nv[1], &nv[2]};
    const char *names[3] = {"node-a", "node-b", "node-c"};
    const char *have[3] = {"python3 python3.11", "none", "python3.12"};
    const char *states[3] = {"alive", "alive", "dead"};
    for (int i = 0; i < 3; i++) {
        hvpb__v1__key_value__init(&kv[i]);
        kv[i].key = "hv.python";
        kv[i].value = (char *)have[i];
        kvp[i][0] = &kv[i];
        hvpb__v1__node_info__init(&info[i]);
        info[i].name = (char *)names[i];
        info[i].labels = kvp[i];
        info[i].n_labels = 1;
        hvpb__v1__node_view__init(&nv[i]);
        nv[i].info = &info[i];
        nv[i].state = (char *)states[i];
    }
    char msg[512] = "";
    /* python3.12 only on the dead node: refused, naming the alive nodes and what they have */
    CHECK(hv_cli_interp_missing("python3.12", np, 3, msg, sizeof(msg)) == 1);
    CHECK_STR(msg, "no node has 'python3.12' on its PATH (node-a: python3 python3.11; node-b: "
                   "none): install it there, or run an interpreter the nodes have");
    /* a node has it: a whole word of the list, not a prefix */
    CHECK(hv_cli_interp_missing("python3", np, 3, msg, sizeof(msg)) == 0);
    CHECK(hv_cli_interp_missing("python3.1", np, 3, msg, sizeof(msg)) == 1);
    /* a path, or a program that is no Python interpreter: not checked */
    CHECK(hv_cli_interp_missing("/opt/py/bin/python3.12", np, 3, msg, sizeof(msg)) == 0);
    CHECK(hv_cli_interp_missing("bash", np, 3, msg, sizeof(msg)) == 0);
    /* an alive node that does not report the label (an older hvagent): not known */
    info[1].n_labels = 0;
    CHECK(hv_cli_interp_missing("python3.12", np, 3, msg, sizeof(msg)) == 0);
    info[1].n_labels = 1;
    /* no node alive (an autoscaler may bring one): not known */
    nv[0].state = "draining";
    nv[1].state = "dead";
    CHECK(hv_cli_interp_missing("python3.12", np, 3, msg, sizeof(msg)) == 0);
    /* a small buffer: cut, still a refusal */
    nv[0].state = "alive";
    char small[24];
    CHECK(hv_cli_interp_missing("python2", np, 3, small, sizeof(small)) == 1);
    CHECK(strncmp(small, "no node has 'python2'", 21) == 0);
}

static void test_progress_pending(void) {
    char buf[256];
    CHECK_STR(hv_cli_fmt_progress("t.bin", 512, 1024, 10, buf, sizeof(buf)),
              "t.bin [#####.....]  50%  512 B of 1.0 KiB");
    CHECK_STR(hv_cli_fmt_progress("t.bin", 2048, 1024, 4, buf, sizeof(buf)),
              "t.bin [####] 100%  1.0 KiB of 1.0 KiB");
    CHECK_STR(hv_cli_fmt_progress("t.bin", 0, 0, 0, buf, sizeof(buf)),
              "uploading t.bin: 100% (0 B of 0 B)");
    CHECK_STR(hv_cli_fmt_progress("t.bin", 256, 1024, 0, buf, sizeof(buf)),
              "uploading t.bin: 25% (256 B of 1.0 KiB)");

    Hvpb__V1__NodeInfo info[3];
    Hvpb__V1__NodeView nv[3];
    Hvpb__V1__NodeView *np[3] = {&nv[0], &nv[1], &nv[2]};
    const char *states[3] = {"alive", "draining", "dead"};
    for (int i = 0; i < 3; i++) {
        hvpb__v1__node_info__init(&info[i]);
        hvpb__v1__node_view__init(&nv[i]);
        info[i].slots = 4;
        info[i].gpus = 1;
        nv[i].info = &info[i];
        nv[i].state = (char *)states[i];
        nv[i].slots_used = 1;
    }
    CHECK_STR(hv_cli_fmt_pending(4, np, 3, buf, sizeof(buf)),
              "waiting for 4 free slots: 3 of 4 free now (1 node alive, 1 draining, 1 dead)");

    /* hvctl status: counts by state, slots of dead nodes nowhere, the pending demand. */
    Hvpb__V1__JobView jv[5];
    Hvpb__V1__JobView *jp[5] = {&jv[0], &jv[1], &jv[2], &jv[3], &jv[4]};
    const char *js[5] = {"pending", "running", "running", "failed", "pending"};
    for (int i = 0; i < 5; i++) {
        hvpb__v1__job_view__init(&jv[i]);
        jv[i].job_id = (uint64_t)(9 - i); /* newest first, as ListJobs gives them */
        jv[i].state = (char *)js[i];
        jv[i].name = "t";
        jv[i].np = 2;
    }
    jv[2].elastic = 1;
    jv[2].size = 2;
    jv[2].max_np = 5;
    jv[4].np = 3;
    hv_cli_status_t st;
    hv_cli_status_count(np, 3, jp, 5, &st);
    CHECK_EQ(st.nodes_alive, 1);
    CHECK_EQ(st.nodes_draining, 1);
    CHECK_EQ(st.nodes_dead, 1);
    CHECK(st.slots_used == 2 && st.slots_free == 3 && st.slots_alive == 4 &&
          st.slots_draining == 4 && st.gpus == 2);
    CHECK_EQ(st.jobs_pending, 2);
    CHECK_EQ(st.jobs_running, 2);
    CHECK_EQ(st.jobs_failed, 1);
    CHECK(st.demand_slots == 5);
    CHECK(st.grow_jobs == 1 && st.grow_workers == 3);
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    hv_cli_status_print(f, "prod", "h:1", &st, jp, 5, 0);
    fclose(f);
    CHECK_HAS(text, "cluster: prod at h:1\nnodes:   1 alive, 1 draining, 1 dead\n");
    CHECK_HAS(text, "slots:   2 used, 3 free (4 on alive nodes, 4 on draining nodes), 2 GPUs\n");
    CHECK_HAS(text,
              "jobs:    2 pending, 0 placing, 2 running, 0 succeeded, 1 failed, 0 cancelled\n");
    CHECK_HAS(text, "demand:  2 jobs waiting for 5 slots (3 free now); 1 elastic job could grow by "
                    "3 workers\n");
    /* Oldest first: job 5 (np 3) before job 9. */
    const char *j5 = strstr(text, "  job 5 (t) waits for 3 slots");
    const char *j9 = strstr(text, "  job 9 (t) waits for 2 slots");
    CHECK(j5 != NULL && j9 != NULL && j5 < j9);
    free(text);
    text = NULL;
    f = open_memstream(&text, &tlen);
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_status_json(&j, "prod", "h:1", &st, jp, 5, NULL, 0);
    CHECK_RC(hv_cli_json_finish(&j), HV_OK);
    fclose(f);
    CHECK_HAS(text, "\"pending_demand\": {\n    \"jobs\": 2,\n    \"slots\": 5,");
    CHECK_HAS(text, "\"free\": 3,");
    CHECK_HAS(text, "\"cluster_name\": \"prod\",\n  \"head\": \"h:1\",");
    CHECK(strstr(text, "\"actors\"") == NULL); /* a head without the Actors service */
    free(text);

    /* With actors: counts by state, and the ones waiting for a place (the head's `waiting`:
     * a moving one too) with their reason. */
    Hvpb__V1__ActorView av[5];
    Hvpb__V1__ActorView *ap[5] = {&av[0], &av[1], &av[2], &av[3], &av[4]};
    const char *as[5] = {"alive", "pending", "restarting", "dead", "moving"};
    for (int i = 0; i < 5; i++) {
        hvpb__v1__actor_view__init(&av[i]);
        av[i].id = (uint64_t)(i + 1);
        av[i].namespace_ = "default";
        av[i].class_name = "counter";
        av[i].state = (char *)as[i];
        av[i].slots = 1;
        av[i].reason = "";
    }
    av[1].name = "big";
    av[1].slots = 3;
    av[1].reason = "waiting for a node with 3 free slots (2 nodes take work)";
    av[2].reason = "restarting (restart 1 of 2): its process was killed by signal 9";
    av[1].waiting = av[2].waiting = av[4].waiting = 1;
    av[4].reason = "waiting for a node with 1 free slot, labels disk=ssd";
    Hvpb__V1__ListActorsReply ar = HVPB__V1__LIST_ACTORS_REPLY__INIT;
    ar.n_actors = 5;
    ar.actors = ap;
    size_t count[HV_CLI_ACTOR_STATES];
    hv_cli_actor_count(&ar, count);
    CHECK(count[0] == 1 && count[1] == 0 && count[2] == 1 && count[3] == 1 && count[4] == 1 &&
          count[5] == 1);
    text = NULL;
    f = open_memstream(&text, &tlen);
    hv_cli_json_init(&j, f);
    hv_cli_status_json(&j, "prod", "h:1", &st, jp, 5, &ar, 0);
    CHECK_RC(hv_cli_json_finish(&j), HV_OK);
    fclose(f);
    CHECK_HAS(text,
              "\"actors\": {\n    \"alive\": 1,\n    \"starting\": 0,\n    "
              "\"restarting\": 1,\n    \"moving\": 1,\n    \"pending\": 1,\n    \"dead\": 1\n  },");
    CHECK_HAS(text, "\"actors\": [\n      {\n        \"id\": 2,\n        \"namespace\": "
                    "\"default\",\n        \"name\": \"big\",\n        \"class\": \"counter\",\n "
                    "       \"state\": \"pending\",\n        \"slots\": 3,\n        \"gpus\": 0,\n "
                    "       \"reason\": \"waiting for a node with 3 free slots (2 nodes take "
                    "work)\"\n      },");
    CHECK_HAS(text, "\"id\": 3,");
    CHECK_HAS(text, "\"reason\": \"restarting (restart 1 of 2): its process was killed by "
                    "signal 9\"");
    CHECK_HAS(text, "\"id\": 5,");
    CHECK_HAS(text, "\"state\": \"moving\"");
    CHECK(strstr(text, "\"id\": 1,") == NULL && strstr(text, "\"id\": 4,") == NULL);
    free(text);
}

static void test_check_files(void) {
    char bin[512], data[512], sub[512], data2[512];
    make_tmpdir();
    put_elf("train.bin", 0755, bin, sizeof(bin));
    put_file("data.txt", "1 2 3\n", 6, 0644, data, sizeof(data));
    snprintf(sub, sizeof(sub), "%s/sub", tmpdir);
    mkdir(sub, 0755);
    put_file("sub/data.txt", "4 5 6\n", 6, 0644, data2, sizeof(data2));

    char line[2048];

    snprintf(line, sizeof(line), "--file %s %s", data, bin);
    submit_step(line, check_files, HV_OK, NULL, NULL);

    /* Two files named data.txt would land on top of each other. */
    snprintf(line, sizeof(line), "--file %s --file %s %s", data, data2, bin);
    submit_step(line, check_files, HV_EINVAL, "have the same name 'data.txt'", NULL);

    /* A file named like the program. */
    snprintf(line, sizeof(line), "--file %s/train.bin %s/sub/../train.bin", tmpdir, tmpdir);
    submit_step(line, check_files, HV_EINVAL, "same name as the program", NULL);

    /* A missing --file and a directory --file. */
    snprintf(line, sizeof(line), "--file %s/nope.txt %s", tmpdir, bin);
    submit_step(line, check_files, HV_ENOTFOUND, "--file ", "nope.txt: no such file");

    snprintf(line, sizeof(line), "--file %s %s", sub, bin);
    submit_step(line, check_files, HV_EINVAL, "is a directory", NULL);
}

/* hvsubmit -- python3 train.py: the interpreter runs from the nodes, the script and --workdir's
 * files and subdirectories are shipped (bounded, .hvignore, each under its path below DIR), a
 * script without its interpreter gets the hint. */
static void test_prepare(void) {
    char err[HV_CLI_ERR_LEN], script[512], path[512], store[4096];
    make_tmpdir();
    CHECK(hv_cli_is_node_command("python3"));
    CHECK(hv_cli_is_node_command("/usr/bin/python3.11"));
    CHECK(hv_cli_is_node_command("sh"));                  /* on this machine's PATH */
    CHECK(!hv_cli_is_node_command("hv-no-such-program")); /* a typo: a missing file */
    CHECK(!hv_cli_is_node_command("/bin/cat"));
    CHECK(!hv_cli_is_node_command("./python3-trainer"));

    put_file("train.py", "print(1)\n", 9, 0644, script, sizeof(script));
    snprintf(path, sizeof(path), "%s/wd", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/wd/sub", tmpdir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/wd/__pycache__", tmpdir);
    mkdir(path, 0755);
    put_file("wd/helper.py", "x = 1\n", 6, 0644, path, sizeof(path));
    put_file("wd/data.bin", "b", 1, 0644, path, sizeof(path));
    put_file("wd/.env", "S=1\n", 4, 0600, path, sizeof(path));
    put_file("wd/old.pyc", "c", 1, 0644, path, sizeof(path));
    put_file("wd/.hvignore", "# big data\n  *.bin  \nsub/skip.txt\n", 34, 0644, path, sizeof(path));
    put_file("wd/sub/mod.py", "y = 2\n", 6, 0644, path, sizeof(path));
    put_file("wd/sub/skip.txt", "s", 1, 0644, path, sizeof(path));
    put_file("wd/sub/w.bin", "w", 1, 0644, path, sizeof(path));
    snprintf(path, sizeof(path), "%s/wd/link", tmpdir);
    CHECK(symlink("sub", path) == 0); /* a link to a directory: not followed */

    char *argv[16];
    char line[2048];
    hv_cli_submit_opts_t o;
    snprintf(line, sizeof(line), "-np 2 --workdir %s/wd -- python3 -u %s --lr 0.1", tmpdir, script);
    int argc = split_args(line, store, sizeof(store), argv, 16);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_submit_prepare(&o, err, sizeof(err)), HV_OK);
    CHECK(o.command);
    CHECK_STR(o.binary, "python3");
    CHECK_STR(o.script, "train.py");
    CHECK_EQ(o.nargs, 4);
    CHECK_STR(o.args[1], "train.py"); /* the name it has in the worker's directory */
    CHECK_EQ(o.nfiles, 3);            /* train.py, wd/helper.py and wd/sub/mod.py only */
    CHECK_STR(hv_cli_ship_name(&o, 0), "train.py");
    int helper = strcmp(hv_cli_ship_name(&o, 1), "helper.py") == 0 ? 1 : 2;
    CHECK_STR(hv_cli_ship_name(&o, (size_t)helper), "helper.py");
    CHECK_STR(hv_cli_ship_name(&o, (size_t)(3 - helper)), "sub/mod.py"); /* its path below DIR */
    CHECK_STR(hv_cli_basename(o.files[3 - helper]), "mod.py");
    CHECK_EQ(o.workdir_skipped, 1); /* link (__pycache__ is left out by name) */
    CHECK_STR(o.workdir_first_skipped, "link");
    hv_cli_submit_opts_fini(&o);

    /* The script's own directory as --workdir: the script is shipped once. */
    put_file("wd/run.py", "print(2)\n", 9, 0644, path, sizeof(path));
    snprintf(line, sizeof(line), "--workdir %s/wd python3 %s/wd/run.py", tmpdir, tmpdir);
    argc = split_args(line, store, sizeof(store), argv, 16);
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_submit_prepare(&o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.nfiles, 3);
    hv_cli_submit_opts_fini(&o);

    /* Deeper than HV_CLI_WORKDIR_MAX_DEPTH: a message naming .hvignore. */
    char deep[1024];
    int dn = snprintf(deep, sizeof(deep), "%s/wd2", tmpdir);
    mkdir(deep, 0755);
    for (unsigned i = 0; i < HV_CLI_WORKDIR_MAX_DEPTH; i++) {
        dn += snprintf(deep + dn, sizeof(deep) - (size_t)dn, "/d");
        mkdir(deep, 0755);
    }
    snprintf(line, sizeof(line), "--workdir %s/wd2 python3 %s", tmpdir, script);
    submit_step(line, hv_cli_submit_prepare, HV_EINVAL, "directories deep", ".hvignore");

    /* Over the file bound: a message naming .hvignore. */
    for (unsigned i = 0; i <= HV_CLI_WORKDIR_MAX_FILES; i++) {
        char name[64];
        snprintf(name, sizeof(name), "wd/sub/f%u.txt", i);
        put_file(name, "", 0, 0644, path, sizeof(path));
    }
    snprintf(line, sizeof(line), "--workdir %s/wd/sub python3 %s", tmpdir, script);
    submit_step(line, hv_cli_submit_prepare, HV_EINVAL, "more than 200 files", ".hvignore");

    snprintf(line, sizeof(line), "--workdir %s/nowhere python3 %s", tmpdir, script);
    submit_step(line, hv_cli_submit_prepare, HV_ENOTFOUND, "no such directory", NULL);

    /* The script itself as the program: refused, with how to submit it. */
    snprintf(line, sizeof(line), "%s", script);
    submit_step(line, hv_cli_submit_prepare, HV_EINVAL,
                "to run a script, give its interpreter: hvsubmit -np N -- python3 ", NULL);
    static const char sh[] = "#!/usr/bin/env bash\necho hi\n";
    put_file("run.sh", sh, sizeof(sh) - 1, 0755, path, sizeof(path));
    CHECK_RC(hv_cli_check_binary(path, err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "give its interpreter: hvsubmit -np N -- bash ");
}

/* ---- job outcome ---------------------------------------------------------------------------- */

static void set_worker(Hvpb__V1__WorkerView *w, uint32_t rank, const char *node, const char *state,
                       int exit_code, int sig) {
    hvpb__v1__worker_view__init(w);
    w->rank = rank;
    w->node = (char *)node;
    w->state = (char *)state;
    w->exit_code = exit_code;
    w->term_signal = sig;
}

static void test_exit_status(void) {
    Hvpb__V1__WorkerView ws[4];
    Hvpb__V1__WorkerView *wp[4] = {&ws[0], &ws[1], &ws[2], &ws[3]};
    Hvpb__V1__JobView v = HVPB__V1__JOB_VIEW__INIT;
    v.workers = wp;
    v.n_workers = 4;
    const Hvpb__V1__WorkerView *first = NULL;
    char buf[256];

    set_worker(&ws[0], 0, "n1", "exited", 0, 0);
    set_worker(&ws[1], 1, "n1", "exited", 0, 0);
    set_worker(&ws[2], 2, "n2", "exited", 0, 0);
    set_worker(&ws[3], 3, "n2", "exited", 0, 0);
    v.state = "succeeded";
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 0);
    CHECK(first == NULL);

    /* Rank 2 exits 3; the head then kills the others: rank 2 is the culprit. */
    v.state = "failed";
    set_worker(&ws[0], 0, "n1", "killed", -1, 15);
    set_worker(&ws[2], 2, "n2", "exited", 3, 0);
    set_worker(&ws[3], 3, "n2", "exited", 7, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 3);
    CHECK(first == &ws[2]);
    CHECK_STR(hv_cli_worker_outcome(&ws[2], buf, sizeof(buf)),
              "rank 2 on node n2 exited with status 3");
    CHECK_STR(hv_cli_worker_outcome(&ws[0], buf, sizeof(buf)),
              "rank 0 on node n1 was killed by signal SIGTERM");

    /* Killed by a signal: 128 + signal. */
    set_worker(&ws[2], 2, "n2", "exited", -1, 9);
    set_worker(&ws[3], 3, "n2", "exited", 0, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 137);
    ws[2].reason = "out of memory";
    CHECK_STR(hv_cli_worker_outcome(&ws[2], buf, sizeof(buf)),
              "rank 2 on node n2 was killed by signal SIGKILL (out of memory)");

    /* Any exit status 1..255 is the rank's own (200 stays 200); a lost worker: 1. */
    set_worker(&ws[0], 0, "n1", "exited", 0, 0);
    set_worker(&ws[2], 2, "n2", "exited", 200, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 200);
    set_worker(&ws[2], 2, "n2", "exited", 255, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 255);
    set_worker(&ws[2], 2, "n2", "exited", 2, 0); /* a program's exit 2 is not a usage error */
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 2);
    CHECK(2 != HV_CLI_EXIT_USAGE);
    set_worker(&ws[2], 2, "", "lost", -1, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 1);
    CHECK_STR(hv_cli_worker_outcome(&ws[2], buf, sizeof(buf)), "rank 2 was lost");

    /* Elastic: a failure survived in generation 1 does not decide the status of a job that
     * failed later for another reason (reset limit); a failure in the last formed round does. */
    {
        Hvpb__V1__JobView e = v;
        Hvpb__V1__WorkerView ew[3];
        Hvpb__V1__WorkerView *ep[3] = {&ew[0], &ew[1], &ew[2]};
        e.workers = ep;
        e.n_workers = 3;
        e.elastic = 1;
        e.state = "failed";
        e.generation = 3;
        e.round_state = "not formed";
        set_worker(&ew[0], 0, "n1", "exited", -1, 9); /* survived in generation 1 */
        ew[0].generation = 1;
        set_worker(&ew[1], 0, "n2", "killed", -1, 15); /* stopped when the job ended */
        ew[1].generation = 2;
        set_worker(&ew[2], 1, "n2", "exited", 0, 0);
        ew[2].generation = 2;
        CHECK_EQ(hv_cli_job_exit_status(&e, 0, &first), 1);
        set_worker(&ew[2], 1, "n2", "exited", 4, 0); /* the last round's member failed */
        ew[2].generation = 2;
        CHECK_EQ(hv_cli_job_exit_status(&e, 0, &first), 4);
        e.size = 2;
        e.resets = 2;
        CHECK_STR(hv_cli_elastic_summary(&e, buf, sizeof(buf)),
                  "generation 3 did not form; generation 2 had 2 workers; 2 resets");
    }

    /* Failed with no failing worker (e.g. timed out waiting for slots): 1. */
    set_worker(&ws[2], 2, "n2", "pending", 0, 0);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, &first), 1);
    CHECK(first == NULL);

    v.state = "cancelled";
    CHECK_EQ(hv_cli_job_exit_status(&v, 1, NULL), 130);
    CHECK_EQ(hv_cli_job_exit_status(&v, 0, NULL), 1);
}

static void test_elastic_formats(void) {
    char buf[512];
    Hvpb__V1__JobView v = HVPB__V1__JOB_VIEW__INIT;
    v.elastic = 1;
    v.generation = 3;
    v.size = 2;
    v.resets = 1;
    CHECK_STR(hv_cli_elastic_summary(&v, buf, sizeof(buf)), "generation 3, 2 workers, 1 reset");
    v.size = 1;
    v.resets = 0;
    CHECK_STR(hv_cli_elastic_summary(&v, buf, sizeof(buf)), "generation 3, 1 worker, 0 resets");

    CHECK_STR(hv_cli_fmt_round(&v, buf, sizeof(buf)), "-"); /* no round yet */
    v.round_state = "closed";
    v.round_reason = "failure: rank 1 on n2 exited with status 3";
    CHECK_STR(hv_cli_fmt_round(&v, buf, sizeof(buf)),
              "closed (opened for: failure: rank 1 on n2 exited with status 3)");
    v.round_state = "open";
    v.round_reason = "";
    CHECK_STR(hv_cli_fmt_round(&v, buf, sizeof(buf)), "open");

    /* Blacklist entries, seen at t = 1000 s. */
    uint64_t now = 1000000;
    Hvpb__V1__BlacklistEntry b1 = HVPB__V1__BLACKLIST_ENTRY__INIT;
    Hvpb__V1__BlacklistEntry b2 = HVPB__V1__BLACKLIST_ENTRY__INIT;
    Hvpb__V1__BlacklistEntry b3 = HVPB__V1__BLACKLIST_ENTRY__INIT;
    b1.job_id = 3;
    b1.strikes = 1;
    b1.until_ms = now + 41500; /* 41.5 s left: shown rounded up */
    b2.job_id = 5;
    b2.strikes = 5;
    b2.permanent = 1;
    b3.job_id = 4;
    b3.strikes = 2;
    b3.until_ms = now - 1;
    Hvpb__V1__BlacklistEntry *bl[] = {&b1, &b2, &b3};
    CHECK_STR(hv_cli_fmt_blacklist(bl, 0, now, buf, sizeof(buf)), "-");
    CHECK_STR(hv_cli_fmt_blacklist(bl, 1, now, buf, sizeof(buf)), "job 3: 1 strike, 42s left");
    CHECK_STR(hv_cli_fmt_blacklist(bl, 3, now, buf, sizeof(buf)),
              "job 3: 1 strike, 42s left; job 5: permanent (5 strikes); job 4: 2 strikes, "
              "cooldown over");
    b1.until_ms = now + 185000;
    b2.strikes = 1;
    CHECK_STR(hv_cli_fmt_blacklist(bl, 2, now, buf, sizeof(buf)),
              "job 3: 1 strike, 3m05s left; job 5: permanent (1 strike)");
    /* A small buffer cuts the text, still terminated. */
    char small[20];
    CHECK_STR(hv_cli_fmt_blacklist(bl, 3, now, small, sizeof(small)), "job 3: 1 strike, 3m");

    /* drain/undrain's NODE. */
    char err[HV_CLI_ERR_LEN];
    CHECK_RC(hv_cli_check_node("gpu-node-1", err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_check_node("12", err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_check_node("a.b_c-d", err, sizeof(err)), HV_OK);
    CHECK_RC(hv_cli_check_node("", err, sizeof(err)), HV_EINVAL);
    CHECK_RC(hv_cli_check_node("two words", err, sizeof(err)), HV_EINVAL);
    CHECK_HAS(err, "bad node 'two words': expected a node name");
    CHECK_RC(hv_cli_check_node("a/b", err, sizeof(err)), HV_EINVAL);
    char longname[200];
    memset(longname, 'x', 129);
    longname[129] = '\0';
    CHECK_RC(hv_cli_check_node(longname, err, sizeof(err)), HV_EINVAL);
}

static void test_events_and_formats(void) {
    char buf[64];
    for (int elastic = 0; elastic <= 1; elastic++) {
        CHECK(hv_cli_event_shown("job.state", elastic));
        CHECK(hv_cli_event_shown("job.note", elastic));
        CHECK(hv_cli_event_shown("job.reset", elastic));
        CHECK(hv_cli_event_shown("worker.exit", elastic));
        CHECK(hv_cli_event_shown("worker.lost", elastic));
        CHECK(hv_cli_event_shown("worker.fail", elastic));
        CHECK(hv_cli_event_shown("worker.killed", elastic));
        CHECK(hv_cli_event_shown("worker.spawn_failed", elastic));
        CHECK(!hv_cli_event_shown("worker.start", elastic));
        CHECK(!hv_cli_event_shown("job.placed", elastic));
        CHECK(!hv_cli_event_shown("node.join", elastic));
    }
    /* Rounds and workers leaving: only for elastic jobs (a fixed-size job has one round). */
    CHECK(!hv_cli_event_shown("round.open", 0));
    CHECK(!hv_cli_event_shown("round.close", 0));
    CHECK(!hv_cli_event_shown("worker.left", 0));
    CHECK(hv_cli_event_shown("round.open", 1));
    CHECK(hv_cli_event_shown("round.close", 1));
    CHECK(hv_cli_event_shown("round.update", 1));
    CHECK(hv_cli_event_shown("worker.left", 1));

    CHECK_STR(hv_cli_signame(9, buf, sizeof(buf)), "SIGKILL");
    CHECK_STR(hv_cli_signame(15, buf, sizeof(buf)), "SIGTERM");
    CHECK_STR(hv_cli_signame(11, buf, sizeof(buf)), "SIGSEGV");
    CHECK_STR(hv_cli_signame(42, buf, sizeof(buf)), "signal 42");

    CHECK_STR(hv_cli_fmt_duration(0, buf, sizeof(buf)), "0s");
    CHECK_STR(hv_cli_fmt_duration(45999, buf, sizeof(buf)), "45s");
    CHECK_STR(hv_cli_fmt_duration(185000, buf, sizeof(buf)), "3m05s");
    CHECK_STR(hv_cli_fmt_duration(7620000, buf, sizeof(buf)), "2h07m");
    CHECK_STR(hv_cli_fmt_duration(273600000, buf, sizeof(buf)), "3d04h");

    CHECK_STR(hv_cli_fmt_ago(0, 5000, buf, sizeof(buf)), "-");
    CHECK_STR(hv_cli_fmt_ago(5000, 5500, buf, sizeof(buf)), "now");
    CHECK_STR(hv_cli_fmt_ago(6000, 5000, buf, sizeof(buf)), "now");
    CHECK_STR(hv_cli_fmt_ago(1000, 6000, buf, sizeof(buf)), "5s ago");
    CHECK_STR(hv_cli_fmt_ago(1000, 1000 + 180000, buf, sizeof(buf)), "3m ago");
    CHECK_STR(hv_cli_fmt_ago(1000, 1000 + 7200000, buf, sizeof(buf)), "2h ago");
}

/* ---- table and summaries ----------------------------------------------------------------------- */

static void print_table(FILE *f, void *ud) { hv_cli_table_print((hv_cli_table_t *)ud, f); }

/* Text from the head or a worker on a terminal: controls become visible, text stays. */
static void test_clean(void) {
    static const struct {
        const char *in;
        unsigned flags;
        const char *want;
    } cases[] = {
        {"train.bin", 0, "train.bin"},
        {NULL, 0, ""},
        {"back\\slash \"q\"", 0, "back\\slash \"q\""}, /* kept: only controls change */
        {"a\nb\rc\td", 0, "a\\nb\\rc\\td"},
        {"a\tb", HV_CLI_CLEAN_TAB, "a\tb"}, /* worker output keeps its tabs */
        {"\x1b[2Jclear", HV_CLI_CLEAN_TAB, "\\x1b[2Jclear"},
        {"\x1b]0;title\x07x", 0, "\\x1b]0;title\\x07x"}, /* a window title */
        {"del\x7f", 0, "del\\x7f"},
        {"d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80", 0,
         "d\xc3\xa9j\xc3\xa0 \xe2\x82\xac \xf0\x9f\x98\x80"}, /* UTF-8 kept */
        {"c1 \xc2\x9b"
         "2J",
         0, "c1 \\xc2\\x9b2J"},              /* U+009B, 8-bit CSI */
        {"nbsp\xc2\xa0", 0, "nbsp\xc2\xa0"}, /* U+00A0 is text */
        {"raw \x9b"
         "2J",
         0, "raw \\x9b2J"}, /* a lone C1 byte */
        {"bad \xc0\xaf \xed\xa0\x80 \xe2\x82", 0,
         "bad \\xc0\\xaf \\xed\\xa0\\x80 \\xe2\\x82"}, /* overlong, surrogate, cut */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[128];
        CHECK_STR(hv_cli_clean(cases[i].in, cases[i].flags, buf, sizeof(buf)), cases[i].want);
        CHECK_EQ(hv_cli_clean_needed(cases[i].in, cases[i].flags),
                 strcmp(cases[i].in ? cases[i].in : "", cases[i].want) != 0);
        char *mem = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&mem, &len);
        hv_cli_clean_write(f, cases[i].in, cases[i].flags);
        fclose(f);
        CHECK_STR(mem, cases[i].want);
        free(mem);
    }
    /* Cut to fit at a piece boundary: never half an escape or half a character. */
    char small[6];
    CHECK_STR(hv_cli_clean("ab\x1b"
                           "cd",
                           0, small, sizeof(small)),
              "ab");
    CHECK_STR(hv_cli_clean("abcd\xc3\xa9\xc3\xa9", 0, small, sizeof(small)), "abcd");
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    hv_cli_say(f, "hvsubmit", "job 1 (x\x1b[2J) failed\nFAKE");
    fclose(f);
    CHECK_STR(mem, "hvsubmit: job 1 (x\\x1b[2J) failed\\nFAKE\n");
    free(mem);
}

static void test_table(void) {
    static const char *const hdr[] = {"ID", "NAME", "STATE"};
    hv_cli_table_t *t = NULL;
    CHECK_RC(hv_cli_table_create(3, hdr, &t), HV_OK);
    if (t == NULL) {
        return;
    }
    static const char *const r1[] = {"7", "train.bin", "running"};
    static const char *const r2[] = {"12", "", "failed"};                   /* empty shows as "-" */
    static const char *const r3[] = {"3", "d\xc3\xa9j\xc3\xa0", "a\tb\nc"}; /* UTF-8, controls */
    CHECK_RC(hv_cli_table_add(t, r1), HV_OK);
    CHECK_RC(hv_cli_table_add(t, r2), HV_OK);
    CHECK_RC(hv_cli_table_add(t, r3), HV_OK);
    CHECK_EQ(hv_cli_table_rows(t), 3);
    char *out = hv_check_capture(print_table, t);
    CHECK_STR(out, "ID  NAME       STATE\n"
                   "7   train.bin  running\n"
                   "12  -          failed\n"
                   "3   d\xc3\xa9j\xc3\xa0       a\\tb\\nc\n");
    free(out);
    hv_cli_table_destroy(t);
    hv_cli_table_destroy(NULL);

    /* Out of memory while adding a row leaves the table usable and leak-free. */
    CHECK_RC(hv_cli_table_create(3, hdr, &t), HV_OK);
    for (int i = 0; i < 20; i++) {
        hv_mem_fail_after(1 + i % 3);
        hv_cli_table_add(t, r1);
        hv_mem_fail_after(0);
    }
    out = hv_check_capture(print_table, t);
    CHECK_HAS(out, "ID  NAME");
    free(out);
    hv_cli_table_destroy(t);
}

/* hvctl actor create's line under an actor it could not place decides on the state and the
 * head's waiting flag: a reason in any words is shown or not the same way. */
static void test_actor_wait_reason(void) {
    static const struct {
        const char *state;
        int waiting;
        const char *reason;
        int shown;
    } rows[] = {
        {"pending", 1, "waiting for a node with 2 GPUs (0 of 3 nodes that take work could hold it)",
         1},
        {"pending", 1, "wartet auf einen Knoten mit 2 GPUs", 1},
        /* A wait reason in words that start as the creation's announcement: shown (it was
         * taken for the announcement and hidden when the CLI read the words). */
        {"pending", 1, "created, but no node can ever hold it: none has the label gpu=a100", 1},
        {"pending", 0, "erstellt (hoechstens 3 Neustarts)", 0},
        {"starting", 0, "placed on node-a", 0},
        {"pending", 1, "", 0},
        /* the state's word changed, its code not: decided the same (code set below) */
        {"wartend", 1, "wartet auf einen Knoten", 1},
        {"pending", 1, "the word says pending, the code says alive", 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        Hvpb__V1__ActorView v = HVPB__V1__ACTOR_VIEW__INIT;
        v.state = (char *)rows[i].state;
        if (strcmp(rows[i].state, "wartend") == 0) {
            v.state_code = HVPB__V1__ACTOR_STATE__ACTOR_STATE_PENDING;
        } else if (strstr(rows[i].reason, "the code says alive") != NULL) {
            v.state_code = HVPB__V1__ACTOR_STATE__ACTOR_STATE_ALIVE;
        }
        v.waiting = rows[i].waiting;
        v.reason = (char *)rows[i].reason;
        const char *got = hv_cli_actor_wait_reason(&v);
        CHECK_EQ(got != NULL, rows[i].shown);
        if (got != NULL) {
            CHECK_STR(got, rows[i].reason);
        }
    }
}

/* hv_cli_actor_history: the steps of one actor, the newest `max`, counted. */
static void test_actor_history(void) {
    static const char *const data[] = {
        "{\"actor_id\":4,\"step\":\"\"}",        /* created */
        "{\"actor_id\":4,\"step\":\"restart\"}", /* 1 */
        "",                                      /* no data: an older head's */
        "{\"actor_id\":5,\"step\":\"restart\"}", /* another actor's */
        "{\"actor_id\":4,\"step\":\"move\"}",    /* 4 */
        "{\"step\":\"death\"}",                  /* names no actor */
        "{\"actor_id\":4,\"step\":\"death\"}",   /* 6 */
    };
    enum { N = sizeof(data) / sizeof(data[0]) };
    Hvpb__V1__Event es[N], *ep[N];
    for (size_t i = 0; i < N; i++) {
        hvpb__v1__event__init(&es[i]);
        es[i].data = (char *)data[i];
        ep[i] = &es[i];
    }
    static const struct {
        uint64_t actor;
        size_t max, n, earlier;
        size_t pick[3];
    } cases[] = {
        {4, 20, 3, 0, {1, 4, 6}}, {4, 2, 2, 1, {4, 6}}, {4, 1, 1, 2, {6}},
        {4, 0, 0, 3, {0}},        {5, 20, 1, 0, {3}},   {9, 20, 0, 0, {0}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t pick[20] = {0}, earlier = 99;
        size_t n = hv_cli_actor_history(ep, N, cases[c].actor, cases[c].max, pick, &earlier);
        CHECK_EQ((int)n, (int)cases[c].n);
        CHECK_EQ((int)earlier, (int)cases[c].earlier);
        for (size_t k = 0; k < n && k < 3; k++) {
            CHECK_EQ((int)pick[k], (int)cases[c].pick[k]);
        }
    }
}

static void test_parse_oom(void) {
    /* Every allocation of a parse can fail without a leak or a crash. */
    char store[512], err[HV_CLI_ERR_LEN];
    char *argv[64];
    for (long n = 1; n <= 16; n++) {
        int argc = split_args("--env A=1 --env B=2 --env A=3 --file x --file y t", store,
                              sizeof(store), argv, 64);
        hv_cli_submit_opts_t o;
        memset(&o, 0, sizeof(o));
        hv_mem_fail_after(n);
        hv_err rc = hv_cli_submit_parse(argc, argv, &o, err, sizeof(err));
        hv_mem_fail_after(0);
        CHECK(rc == HV_OK || rc == HV_ENOMEM);
        hv_cli_submit_opts_fini(&o);
    }
}

/* 50,000 --env options, each name given twice (the second pass in the reverse order): one pair
 * per name, in the order the names first came, each with its last value. The merge is n log n;
 * the quadratic one it replaced took minutes here (the result is checked, not the time). */
static void test_env_many(void) {
    enum { NAMES = 25000, OPTS = 2 * NAMES };
    int argc = 1 + 2 * OPTS + 1;
    char **argv = calloc((size_t)argc + 1, sizeof(*argv));
    char *store = malloc((size_t)OPTS * 24);
    CHECK(argv != NULL && store != NULL);
    if (argv == NULL || store == NULL) {
        free(argv);
        free(store);
        return;
    }
    argv[0] = "hvsubmit";
    for (int k = 0; k < OPTS; k++) {
        unsigned name = (unsigned)(k < NAMES ? k : OPTS - 1 - k); /* 0..24999, then 24999..0 */
        char *s = store + (size_t)k * 24;
        snprintf(s, 24, "K%u=%c%u", name, k < NAMES ? 'a' : 'b', name);
        argv[1 + 2 * k] = "--env";
        argv[2 + 2 * k] = s;
    }
    argv[argc - 1] = "t";
    hv_cli_submit_opts_t o;
    char err[HV_CLI_ERR_LEN];
    CHECK_RC(hv_cli_submit_parse(argc, argv, &o, err, sizeof(err)), HV_OK);
    CHECK_EQ(o.nenv, NAMES);
    int bad = 0;
    for (size_t i = 0; i < o.nenv && bad < 5; i++) {
        char key[32], value[32];
        snprintf(key, sizeof(key), "K%zu", i);
        snprintf(value, sizeof(value), "b%zu", i);
        if (strcmp(o.env[i].key, key) != 0 || strcmp(o.env[i].value, value) != 0) {
            fprintf(stderr, "env[%zu] = %s=%s, want %s=%s\n", i, o.env[i].key, o.env[i].value, key,
                    value);
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
    hv_cli_submit_opts_fini(&o);

    /* The merge alone, on pairs with names given 1, 2 and 3 times. */
    const char *in[][2] = {{"A", "1"}, {"B", "1"}, {"A", "2"}, {"C", "1"},
                           {"B", "2"}, {"A", "3"}, {"D", ""}};
    hv_cli_kv_t kv[7];
    for (int i = 0; i < 7; i++) {
        kv[i].key = hv_strdup(in[i][0]);
        kv[i].value = hv_strdup(in[i][1]);
    }
    size_t n = 7;
    CHECK_RC(hv_cli_env_dedupe(kv, &n), HV_OK);
    CHECK_EQ(n, 4);
    const char *want[][2] = {{"A", "3"}, {"B", "2"}, {"C", "1"}, {"D", ""}};
    for (size_t i = 0; i < n && i < 4; i++) {
        CHECK_STR(kv[i].key, want[i][0]);
        CHECK_STR(kv[i].value, want[i][1]);
    }
    for (size_t i = 0; i < n; i++) {
        hv_cli_kv_fini(&kv[i]);
    }
    free(argv);
    free(store);
}

/* ---- runner --------------------------------------------------------------------------------- */

/* hvctl status's fleet: jobs running/waiting/preempted and the resizes of the window by cause
 * from the fleet.* events (older ones and other kinds not counted). */
/* Namespaces: the policy's own figures (ListJobsReply.namespaces), each job counted in the one its
 * JobView names, an unlisted one in "default"; without the policy's, the jobs' own namespaces. */
static void fleet_status_ns(Hvpb__V1__JobView *jv, Hvpb__V1__JobView **jp, Hvpb__V1__Event **ep) {
    jv[0].namespace_ = "a";     /* running, 3 workers */
    jv[1].namespace_ = "b";     /* pending */
    jv[2].namespace_ = "";      /* preempted: "default" */
    jv[3].namespace_ = "other"; /* placing, 2 workers: not listed, so "default" */
    jv[4].namespace_ = "a";     /* succeeded: nowhere */
    uint64_t qa[3] = {2, 0, 0}, ua[3] = {3, 0, 0}, ba[3] = {1, 0, 0};
    uint64_t qd[3] = {0, 0, 0}, ud[3] = {2, 0, 0}, bd[3] = {0, 0, 0};
    Hvpb__V1__NamespaceShare ns[3];
    for (int i = 0; i < 3; i++) {
        hvpb__v1__namespace_share__init(&ns[i]);
        ns[i].n_quota = ns[i].n_used = ns[i].n_borrowed = 3;
    }
    ns[0].name = "a";
    ns[0].quota = qa;
    ns[0].used = ua;
    ns[0].borrowed = ba;
    ns[0].share_pm = 750;
    ns[1].name = "b";
    ns[1].quota = qa;
    ns[1].used = bd;
    ns[1].borrowed = bd;
    ns[2].name = "default";
    ns[2].quota = qd;
    ns[2].used = ud;
    ns[2].borrowed = bd;
    ns[2].share_pm = 500;
    Hvpb__V1__NamespaceShare *np[3] = {&ns[0], &ns[1], &ns[2]};
    hv_cli_fleet_t fl;
    hv_cli_fleet_count(jp, 5, np, 3, ep, 8, 100, 2000, 1500, &fl);
    CHECK_EQ(fl.nns, 3);
    CHECK_STR(fl.ns[0].name, "a");
    CHECK(fl.ns[0].policy && fl.ns[0].jobs == 1 && fl.ns[0].workers == 3 && fl.ns[0].used == 3 &&
          fl.ns[0].borrowed == 1 && fl.ns[0].quota == 2 && fl.ns[0].waiting == 0);
    CHECK(fl.ns[1].jobs == 0 && fl.ns[1].workers == 0 && fl.ns[1].waiting == 1);
    CHECK(fl.ns[2].jobs == 1 && fl.ns[2].workers == 2 && fl.ns[2].waiting == 1);
    hv_cli_status_t st;
    memset(&st, 0, sizeof(st));
    st.slots_alive = 4;
    st.fleet = &fl;
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    hv_cli_fleet_print(f, &st);
    fclose(f);
    CHECK_HAS(text, "  namespace a: 1 job, 3 workers, 0 waiting; 3 slots used (quota 2, 1 "
                    "borrowed), share 75.0%\n");
    CHECK_HAS(text, "  namespace b: 0 jobs, 0 workers, 1 waiting; 0 slots used (quota 2, 0 "
                    "borrowed), share 0.0%\n");
    CHECK_HAS(
        text,
        "  namespace default: 1 job, 2 workers, 1 waiting; 2 slots used (no quota), share 50.0%\n");
    CHECK(strstr(text, "namespace other") == NULL);
    free(text);
    text = NULL;
    f = open_memstream(&text, &tlen);
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_status_json(&j, "c", "h:1", &st, jp, 5, NULL, 2000);
    hv_cli_json_finish(&j);
    fclose(f);
    CHECK_HAS(text, "\"name\": \"a\"");
    CHECK_HAS(text, "\"share\": 0.75");
    CHECK_HAS(text, "\"share_pm\": 750");
    CHECK_HAS(text, "\"used\": 3");
    CHECK_HAS(text, "\"borrowed\": 1");
    CHECK_HAS(text, "\"namespaces_left_out\": 0");
    free(text);
    /* Without the policy's namespaces: the jobs' own, "" as "default", in the order seen. */
    hv_cli_fleet_count(jp, 5, NULL, 0, ep, 8, 100, 2000, 1500, &fl);
    CHECK_EQ(fl.nns, 4);
    CHECK(strcmp(fl.ns[0].name, "a") == 0 && fl.ns[0].workers == 3 && !fl.ns[0].policy);
    CHECK(strcmp(fl.ns[2].name, "default") == 0 && fl.ns[2].waiting == 1);
    CHECK(strcmp(fl.ns[3].name, "other") == 0 && fl.ns[3].workers == 2);
    /* More namespaces than a status lists: counted as left out. */
    Hvpb__V1__NamespaceShare many[HV_CLI_FLEET_NS + 2];
    Hvpb__V1__NamespaceShare *mp[HV_CLI_FLEET_NS + 2];
    char names[HV_CLI_FLEET_NS + 2][8];
    for (size_t i = 0; i < HV_CLI_FLEET_NS + 2; i++) {
        hvpb__v1__namespace_share__init(&many[i]);
        snprintf(names[i], sizeof(names[i]), "n%zu", i);
        many[i].name = names[i];
        mp[i] = &many[i];
    }
    hv_cli_fleet_count(jp, 5, mp, HV_CLI_FLEET_NS + 2, ep, 8, 100, 2000, 1500, &fl);
    CHECK(fl.nns == HV_CLI_FLEET_NS && fl.ns_more == 2);
}

static void test_fleet_status(void) {
    Hvpb__V1__JobView jv[5];
    Hvpb__V1__JobView *jp[5] = {&jv[0], &jv[1], &jv[2], &jv[3], &jv[4]};
    const char *js[5] = {"running", "pending", "pending", "placing", "succeeded"};
    for (int i = 0; i < 5; i++) {
        hvpb__v1__job_view__init(&jv[i]);
        jv[i].job_id = (uint64_t)(5 - i);
        jv[i].state = (char *)js[i];
        jv[i].name = "t";
        jv[i].np = 2;
    }
    jv[0].elastic = 1;
    jv[0].size = 3;
    jv[2].fleet_reason = "preempted";
    const struct {
        uint64_t t;
        const char *kind, *data;
    } e[] = {{100, "fleet.shrink", "{\"reason\":\"shrunk_share\"}"}, /* before the window */
             {1000, "fleet.admit", "{\"reason\":\"admitted\",\"from\":0}"},
             {1100, "fleet.grow", "{\"reason\":\"grown\"}"},
             {1200, "fleet.shrink", "{\"reason\":\"shrunk_admit\",\"cause\":2}"},
             {1300, "fleet.shrink", "{\"reason\":\"shrunk_priority\"}"},
             {1400, "fleet.shrink", "{\"reason\":\"shrunk_admit\"}"},
             {1500, "round.open", "{\"reason\":\"shrunk_admit\"}"},
             {1600, "fleet.shrink", "not json"}};
    Hvpb__V1__Event ev[8];
    Hvpb__V1__Event *ep[8];
    for (int i = 0; i < 8; i++) {
        hvpb__v1__event__init(&ev[i]);
        ev[i].time_ms = e[i].t;
        ev[i].kind = (char *)e[i].kind;
        ev[i].data = (char *)e[i].data;
        ep[i] = &ev[i];
    }
    hv_cli_fleet_t fl;
    hv_cli_fleet_count(jp, 5, NULL, 0, ep, 8, 100, 2000, 1500, &fl);
    CHECK_EQ(fl.running, 2);
    CHECK_EQ(fl.waiting, 1);
    CHECK_EQ(fl.preempted, 1);
    CHECK(fl.workers == 5); /* 3 (elastic size) + 2 (placing np) */
    CHECK(fl.complete);
    CHECK(fl.resizes[0] == 1 && fl.resizes[1] == 1 && fl.resizes[2] == 2 && fl.resizes[3] == 1 &&
          fl.resizes[5] == 0 && fl.resizes[7] == 1);
    hv_cli_fleet_count(jp, 5, NULL, 0, ep + 1, 7, 7, 2000, 1500, &fl); /* the limit reached */
    CHECK(!fl.complete);
    CHECK_EQ(hv_cli_resize_cause("job.state", "{}"), -1);
    CHECK_STR(hv_cli_resize_cause_names[hv_cli_resize_cause("fleet.shrink",
                                                            "{\"reason\":\"shrunk_reclaim\"}")],
              "reclaim");
    CHECK_STR(hv_cli_resize_cause_names[hv_cli_resize_cause("fleet.shrink",
                                                            "{\"reason\":\"preempted\"}")],
              "preempt");

    hv_cli_status_t st;
    memset(&st, 0, sizeof(st));
    st.slots_alive = 10;
    hv_cli_fleet_count(jp, 5, NULL, 0, ep, 8, 100, 2000, 1500, &fl);
    st.fleet = &fl;
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    hv_cli_fleet_print(f, &st);
    fclose(f);
    CHECK_HAS(text, "fleet:   2 running (5 workers), 1 waiting, 1 preempted\n");
    /* No policy namespaces from the head: every job in "default", its share of the slots. */
    CHECK_HAS(text, "  namespace default: 2 jobs, 5 workers, 2 waiting, share 50% of 10 slots\n");
    CHECK_HAS(text, "resizes: last 1s: start 1, grow 1, admit 2, priority 1, other 1\n");
    free(text);
    text = NULL;
    f = open_memstream(&text, &tlen);
    hv_cli_json_t j;
    hv_cli_json_init(&j, f);
    hv_cli_status_json(&j, "c", "h:1", &st, jp, 5, NULL, 2000);
    hv_cli_json_finish(&j);
    fclose(f);
    CHECK_HAS(text, "\"fleet\": {");
    CHECK_HAS(text, "\"preempted\": 1");
    CHECK_HAS(text, "\"share\": 0.5");
    CHECK_HAS(text, "\"admit\": 2");
    CHECK_HAS(text, "\"window_s\": 1");
    free(text);
    fleet_status_ns(jv, jp, ep);
}

static const hv_check_case_t tests[] = {
    {"fleet_status", test_fleet_status},
    {"parse_basic", test_parse_basic},
    {"parse_forms", test_parse_forms},
    {"parse_errors", test_parse_errors},
    {"parse_elastic", test_parse_elastic},
    {"parse_oom", test_parse_oom},
    {"env_many", test_env_many},
    {"env", test_env},
    {"head_addr", test_head_addr},
    {"check_binary", test_check_binary},
    {"elf_header", test_elf_header},
    {"exit_codes", test_exit_codes},
    {"progress_pending", test_progress_pending},
    {"interp_missing", test_interp_missing},
    {"check_files", test_check_files},
    {"prepare", test_prepare},
    {"exit_status", test_exit_status},
    {"elastic_formats", test_elastic_formats},
    {"events_and_formats", test_events_and_formats},
    {"clean", test_clean},
    {"table", test_table},
    {"actor_wait_reason", test_actor_wait_reason},
    {"actor_history", test_actor_history},
};

/* Removes what make_tmpdir created (files, one level of subdirectory). */
static void cleanup_tmpdir(void) {
    if (tmpdir[0] == '\0') {
        return;
    }
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    }
}

int main(int argc, char **argv) {
    int rc = hv_check_main(tests, sizeof(tests) / sizeof(tests[0]), argc, argv, NULL, NULL);
    cleanup_tmpdir();
    return rc;
}
