#!/usr/bin/env bats
# The manual pages as a reader sees them: rendered, every op of
# tensorrun-pipeline(5) reads exactly as `tensorrun ops` gives its
# signature (a quote in a signature once ended its roff argument early).

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
}

# render PAGE: the page as plain text on stdout, one long line per output
# line, with groff or mandoc; status 2 when neither is installed
render() {
    if command -v groff >/dev/null; then
        groff -man -Tascii -rLL=300n -rHY=0 -P-cbu "$1" 2> render.err
    elif command -v mandoc >/dev/null; then
        mandoc -man -Tascii -Owidth=300 "$1" 2> render.err | col -b
    else
        return 2
    fi
}

@test "every op line of the rendered tensorrun-pipeline(5) is its signature" {
    "$TENSORRUN" ops --json > ops.json
    rc=0
    render "$TR_SRCDIR/man/tensorrun-pipeline.5" > page.txt || rc=$?
    [ "$rc" -ne 2 ] || skip "neither groff nor mandoc is installed (the roff source is checked below)"
    [ "$rc" -eq 0 ] && [ ! -s render.err ] || { cat render.err; return 1; }
    "$PY" - <<'EOF'
import json
ops = [json.loads(l) for l in open("ops.json")]
lines = [l.strip() for l in open("page.txt", encoding="ascii", errors="replace")]
start = next(i for i, l in enumerate(lines) if l == "OPS")
end = next(i for i in range(start + 1, len(lines)) if lines[i] == "EXIT STATUS")
section = lines[start:end]
# a tag shorter than the indent shares its line with the text after it
def shown(sig):
    return any(l == sig or l.startswith(sig + " ") for l in section)
missing = [o["signature"] for o in ops if not shown(o["signature"])]
assert not missing, "not rendered as written: %s" % missing
# and nothing in the section looks like a signature that is none of them
sigs = {o["signature"] for o in ops}
names = {o["name"] for o in ops}
stray = [l for l in section if "(" in l and l.split("(")[0] in names and l.endswith(")") and l not in sigs]
assert not stray, "signature lines that are not the table's: %s" % stray
gelu = next(o for o in ops if o["name"] == "gelu")["signature"]
assert gelu == 'gelu(x, approximate="none")', gelu
EOF
}

@test "the generated ops section quotes no signature with a bare double quote" {
    "$TENSORRUN" ops --roff > ops.roff
    # a .B argument in quotes may hold a quote only as \(dq
    run ! grep -E '^\.B ".*[^\\(dq]"[^"]*"' ops.roff
    grep -F '.B "gelu(x, approximate=\(dqnone\(dq)"' ops.roff
    run_tensorrun 0 ops --roff
    [ "$(grep -c '^\.B "' <<< "$output")" -eq "$("$TENSORRUN" ops --json | wc -l)" ]
}

@test "the pages say a .npy of an unsupported dtype is exit 3 in a pipeline, 4 in convert" {
    "$PY" -c 'import numpy as np; np.save("c.npy", np.zeros(3, np.complex64))'
    printf 'tensorrun: 1\ninputs: {x: c.npy}\nstages:\n  - name: s\n    do:\n      - y = x * 2\n' > p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"input 'x' has dtype <c8, which tensorrun cannot compute with"* ]]
    run_tensorrun 3 p.yaml
    run_tensorrun 4 convert c.npy o.npy
    rc=0
    render "$TR_SRCDIR/man/tensorrun.1" > page.txt || rc=$?
    [ "$rc" -ne 2 ] || skip "neither groff nor mandoc is installed"
    [ "$rc" -eq 0 ]
    tr -s ' \n' ' ' < page.txt > flat.txt
    grep -qF "a pipeline input of a dtype tensorrun lacks (known from the file's header, so validate finds it)" flat.txt
    grep -qF "a tensor of a dtype tensorrun lacks given to convert" flat.txt
}
