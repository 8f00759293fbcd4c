#! /bin/sh
# tap-driver.sh - an Automake test driver for programs that speak TAP.
#
# Automake calls it as
#   tap-driver.sh --test-name NAME --log-file LOG --trs-file TRS
#                 [--color-tests yes|no] [--expect-failure yes|no]
#                 [--enable-hard-errors yes|no] [--collect-skipped-logs yes|no]
#                 -- COMMAND [ARGS...]
# It runs the command, keeps its output in LOG, prints one line per test
# case ("PASS: NAME 3 - description") and writes the results to TRS in the
# form Automake's test harness reads (":test-result: PASS", ...).
#
# A test program fails as a whole (ERROR) when it exits with a status other
# than 0, prints no plan, prints a plan that disagrees with the number of
# test cases, or bails out.  "not ok ... # TODO" is an expected failure,
# "ok ... # SKIP" a skip.

set -u

name= log= trs= color=no expect_failure=no
while [ $# -gt 0 ]; do
    case $1 in
    --test-name) name=$2; shift ;;
    --log-file) log=$2; shift ;;
    --trs-file) trs=$2; shift ;;
    --color-tests) color=$2; shift ;;
    --expect-failure) expect_failure=$2; shift ;;
    --enable-hard-errors|--collect-skipped-logs) shift ;;
    --) shift; break ;;
    *) echo "tap-driver.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$name" ] || [ -z "$log" ] || [ -z "$trs" ] || [ $# -eq 0 ]; then
    echo "usage: tap-driver.sh --test-name N --log-file L --trs-file T -- CMD..." >&2
    exit 2
fi

out=$(mktemp "${TMPDIR:-/tmp}/tap-driver.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
status=$?
cp "$out" "$log"

if [ "$color" = yes ]; then
    esc=$(printf '\033')
    red="$esc[0;31m" grn="$esc[0;32m" lgn="$esc[1;32m" blu="$esc[1;34m"
    mgn="$esc[0;35m" std="$esc[m"
else
    red= grn= lgn= blu= mgn= std=
fi

awk -v name="$name" -v trs="$trs" -v status="$status" -v xfail="$expect_failure" \
    -v red="$red" -v grn="$grn" -v lgn="$lgn" -v blu="$blu" -v mgn="$mgn" -v std="$std" '
function report(result, text,    col) {
    col = result == "PASS" ? grn : result == "SKIP" ? blu : \
          result == "XFAIL" ? lgn : result == "ERROR" ? mgn : red
    printf "%s%s%s: %s%s\n", col, result, std, name, text
    printf ":test-result: %s\n", result > trs
    results[result]++
}
BEGIN { cases = 0; plan = -1; bailed = 0 }
/^Bail out!/ { bailed = 1; report("ERROR", " - " $0); next }
/^1\.\.[0-9]+/ { plan = substr($1, 4) + 0; next }
/^(not )?ok( |$)/ {
    pass = ($1 == "ok")
    cases++
    text = $0
    sub(/^(not )?ok ?/, "", text)
    directive = toupper(text)
    if (directive ~ /# *SKIP/) result = pass ? "SKIP" : "FAIL"
    else if (directive ~ /# *TODO/) result = pass ? "XPASS" : "XFAIL"
    else result = pass ? "PASS" : "FAIL"
    if (xfail == "yes" && result == "PASS") result = "XPASS"
    else if (xfail == "yes" && result == "FAIL") result = "XFAIL"
    report(result, " " text)
    next
}
END {
    if (!bailed && plan < 0)
        report("ERROR", " - missing test plan")
    else if (!bailed && plan != cases)
        report("ERROR", " - planned " plan " tests but ran " cases)
    if (status != 0)
        report("ERROR", " - exited with status " status)
    global = results["ERROR"] ? "ERROR" : results["FAIL"] ? "FAIL" : \
             results["XPASS"] ? "XPASS" : results["PASS"] ? "PASS" : \
             results["XFAIL"] ? "XFAIL" : "SKIP"
    bad = results["ERROR"] + results["FAIL"] + results["XPASS"]
    printf ":global-test-result: %s\n", global > trs
    printf ":recheck: %s\n", bad ? "yes" : "no" > trs
    printf ":copy-in-global-log: %s\n", bad ? "yes" : "no" > trs
}' "$out"
