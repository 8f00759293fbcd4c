#!/usr/bin/env bats
# tensorrun validate: the plan of a good pipeline, and every error of a bad
# one with its exit status, line and column; tensorrun ops.

bats_require_minimum_version 1.5.0

setup() {
    load helper
    PY=/usr/bin/python3
    cd "$BATS_TEST_TMPDIR"
    "$PY" -c '
import numpy as np, json, struct
np.save("a.npy", np.zeros((1024, 256), "<f4"))
np.save("b.npy", np.zeros((128, 1000), "<f4"))
np.save("q.npy", np.zeros((4, 256), "<f4"))
h = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "f8": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [8, 10]}},
               separators=(",", ":")).encode()
open("two.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(10))'
}

# pipeline BODY: writes p.yaml: the version line, then BODY
pipeline() {
    printf 'tensorrun: 1\n%s\n' "$1" > p.yaml
}

# fails_at STATUS LINE:COL TEXT: validate exits with STATUS and reports
# TEXT at LINE:COL of p.yaml
fails_at() {
    run_tensorrun "$1" validate p.yaml
    [[ "$stderr" == *"tensorrun: p.yaml:$2: error: "*"$3"* ]] ||
        { echo "expected p.yaml:$2 ... $3 in:"; echo "$stderr"; return 1; }
}

GOOD='inputs:
  a: a.npy
  q: q.npy
params:
  k: 5
stages:
  - name: search
    do:
      - an = a / norm(a, dim=-1, keepdim=true)
      - s = q @ an.T
      - v, i = topk(s, k, dim=-1)
outputs:
  v: out.npy'

@test "a good pipeline: its plan on stdout, exit 0" {
    pipeline "$GOOD"
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *'stage 1 "search" on cpu'* ]]
    [[ "$output" == *"an "*"f32[1024,256]"* ]]
    [[ "$output" == *"v "*"f32[4,5]"* ]]
    [[ "$output" == *"i "*"i64[4,5]"* ]]
    [[ "$output" == *"= matmul(%"*"f32[4,1024]"* ]]
    [[ "$output" == *"write out.npy: v (%"* ]]
    [[ "$output" == *"frees %"* ]]
    [[ "$output" == *"keeps: nothing"* ]]
    [[ "$output" == *"pool on cpu: peak "*" bytes) at %"* ]]
    [[ "$output" == *"mapped"* ]]
    [ -z "$stderr" ]
}

@test "the source line and a caret follow the message" {
    pipeline "$GOOD"
    sed -i 's/norm(a/nrom(a/' p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"unknown op 'nrom' (did you mean 'norm'?)"* ]]
    [[ "$stderr" == *"      - an = a / nrom(a, dim=-1, keepdim=true)"* ]]
    [[ "$stderr" == *"^"* ]]
    [[ "$stderr" == *"hint: "* ]]
}

@test "a YAML syntax error: exit 3 at its line" {
    printf 'tensorrun: 1\nstages:\n  - name: x\n    do: [a = b\n' > p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:"*"error: "* ]]
}

@test "unknown keys at every level, each with a suggestion" {
    pipeline 'inputz: {}
inputs:
  a: {path: a.npy, kye: x}
stages:
  - name: s
    doo: [x = a]
outputs:
  x: {path: o.npy, dtyp: f32}'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:2:1: error: "*"inputz"*"did you mean 'inputs'?"* ]]
    [[ "$stderr" == *"p.yaml:4:20: error: "*"kye"*"did you mean 'key'?"* ]]
    [[ "$stderr" == *"p.yaml:7:5: error: "*"doo"*"did you mean 'do'?"* ]]
    [[ "$stderr" == *"p.yaml:9:20: error: "*"dtyp"*"did you mean 'dtype'?"* ]]
}

@test "a missing tensorrun: version is exit 3" {
    printf 'stages:\n  - name: s\n    do: [x = 1]\n' > p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:1:1: error: "*"tensorrun: 1"* ]]
}

@test "a future tensorrun: version is exit 3 naming it" {
    printf 'tensorrun: 2\nstages:\n  - name: s\n    do: [x = 1]\n' > p.yaml
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:1:12: error: this file needs tensorrun format 2; this program reads format 1"* ]]
}

@test "a duplicate stage name" {
    pipeline 'stages:
  - name: s
    do: [x = 1]
  - name: s
    do: [y = 2]'
    fails_at 3 5:11 "duplicate stage name 's'"
}

@test "empty stages" {
    pipeline 'stages: []'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:2:"*"error: "*"stages"* ]]
}

@test "an unknown op, with a suggestion" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = sofmax(a, dim=-1)'
    fails_at 3 6:13 "unknown op 'sofmax' (did you mean 'softmax'?)"
}

@test "a wrong argument count" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = transpose(a, 0, 1, 2)'
    fails_at 3 6:32 "transpose takes at most 3 arguments, not 4"
}

@test "an unknown keyword" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = softmax(a, dmi=0)'
    fails_at 3 6:24 "softmax has no parameter 'dmi' (did you mean 'dim'?)"
}

@test "a keyword given twice" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = softmax(a, dim=0, dim=1)'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:6:"*"error: "*"dim"*"twice"* ]]
}

@test "a tensor where an integer is needed" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = topk(a, a)'
    fails_at 3 6:21 "topk: argument 'k' must be an integer, not a tensor"
}

@test "a name used before anything binds it" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = a + y
      - y = a'
    fails_at 3 6:17 "'y' is used before anything binds it"
}

@test "an output naming a value nothing binds" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do: [x = a * 2]
outputs:
  z: z.npy'
    fails_at 3 7:3 "output 'z' names a value that nothing binds"
}

@test "shape errors found from the inputs' headers: matmul, broadcasting, concat" {
    pipeline 'inputs: {a: a.npy, b: b.npy, q: q.npy}
stages:
  - name: s
    do:
      - m = a @ b
      - c = a + q
      - j = concat([a, b], dim=0)'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:6:15: error: matmul: shapes [1024,256] and [128,1000] do not line up (256 != 128)"* ]]
    [[ "$stderr" == *"p.yaml:7:15: error: add: shapes [1024,256] and [4,256] cannot be broadcast"* ]]
    [[ "$stderr" == *"p.yaml:8:20: error: concat: shapes [1024,256] and [128,1000] differ"* ]]
}

@test "a dtype an op does not take" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - m = a > 0
      - n = -m'
    fails_at 3 7:13 "neg: does not take bool"
}

@test "a dim out of range" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - m = sum(a, dim=2)'
    fails_at 3 6:24 "sum: dim 2 is out of range for a tensor of 2 dimensions"
}

@test "bf16 written to .npy" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = cast(a, bf16)
outputs:
  x: x.npy'
    fails_at 3 8:3 "output 'x' is bf16, which .npy cannot hold"
}

@test "a safetensors input of several tensors and no key" {
    pipeline 'inputs: {w: two.safetensors}
stages:
  - name: s
    do: [x = w * 2]'
    fails_at 3 2:10 "input 'w': two.safetensors holds 2 tensors; which one is meant?"
    [[ "$stderr" == *"hint: "*"w, f8"* ]]
}

@test "an input of an unsupported safetensors dtype is refused where it is used" {
    pipeline 'inputs:
  f: {path: two.safetensors, key: f8}
stages:
  - name: s
    do: [x = f * 2]'
    fails_at 3 6:14 "input 'f' has dtype F8_E4M3, which tensorrun cannot compute with"
}

@test "a missing input file is exit 4" {
    pipeline 'inputs: {a: nope.npy}
stages:
  - name: s
    do: [x = a * 2]'
    run_tensorrun 4 validate p.yaml
    [[ "$stderr" == *"p.yaml:2:"*"error: "*"nope.npy"* ]]
}

@test "-D for an unknown parameter is exit 2" {
    pipeline "$GOOD"
    run_tensorrun 2 validate p.yaml -D kk=3
    [[ "$stderr" == *"kk"* ]]
    run_tensorrun 0 validate p.yaml -D k=7
    [[ "$output" == *"v "*"f32[4,7]"* ]]
}

@test "two errors in one file are both reported" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - x = sofmax(a)
      - y = a @ a'
    run_tensorrun 3 validate p.yaml
    [[ "$stderr" == *"p.yaml:6:13: error: unknown op 'sofmax'"* ]]
    [[ "$stderr" == *"p.yaml:7:15: error: matmul: shapes [1024,256] and [1024,256] do not line up"* ]]
}

@test "relative paths are read from the pipeline's directory" {
    mkdir sub
    cp a.npy sub/
    printf 'tensorrun: 1\ninputs: {a: a.npy}\nstages:\n  - name: s\n    do: [x = a * 2]\n' > sub/p.yaml
    cd /
    run_tensorrun 0 validate "$BATS_TEST_TMPDIR/sub/p.yaml"
}

@test "a foreach stage: typed per block, kept values joined along dimension 0" {
    pipeline 'inputs: {a: a.npy, q: q.npy}
stages:
  - name: search
    foreach: {over: a, size: 300}
    do:
      - s = a @ q.T
      - v, i = topk(s, 2, dim=0)
      - i = i + chunk_start
    keep: [v, i]'
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"foreach a by 300 rows (4 blocks)"* ]]
    [[ "$output" == *"keeps: %"*" v f32[8,4] (the blocks' joined)"* ]]
    [[ "$output" == *"(each block of the foreach)"*"f32[300,"* ]]
}

@test "tensorrun ops lists every op; --json one object per line" {
    run_tensorrun 0 ops
    [[ "$output" == *"topk(x, k, dim=-1, largest=true, sorted=true) -> 2 values"* ]]
    run_tensorrun 0 ops --json
    [ "${#lines[@]}" -eq 152 ]
    "$PY" -c '
import json, sys
ops = [json.loads(l) for l in sys.argv[1].splitlines()]
names = {o["name"] for o in ops}
for want in ["zeros", "softmax", "matmul", "topk", "quantize", "where", "gelu", "cumsum"]:
    assert want in names, want
t = next(o for o in ops if o["name"] == "topk")
assert t["results"] == 2 and [p["name"] for p in t["params"]] == ["x", "k", "dim", "largest", "sorted"], t
assert all(o["doc"] for o in ops)' "$output"
}

@test "the ops section of tensorrun-pipeline(5) is the op table's, not drifted" {
    "$TENSORRUN" ops --roff > ops.roff
    sed -e '/^@OPS@$/{r ops.roff' -e 'd;}' "$TR_SRCDIR/man/tensorrun-pipeline.5.in" > page.5
    cmp page.5 "$TR_SRCDIR/man/tensorrun-pipeline.5" ||
        { echo "man/tensorrun-pipeline.5 is out of date: run make man"; return 1; }
}

@test "two outputs to standard output: only safetensors takes several" {
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - y = a + 1
      - z = a * 2
outputs: {y: "-", z: "-"}'
    fails_at 3 8:23 "outputs 'y' and 'z' both write '-'"
    pipeline 'inputs: {a: a.npy}
stages:
  - name: s
    do:
      - y = a + 1
      - z = a * 2
outputs:
  y: {path: "-", format: safetensors}
  z: {path: "-", format: safetensors}'
    run_tensorrun 0 validate p.yaml
}

@test "a foreach stage prints its parts: once before the blocks, each block, after; and its joins" {
    pipeline 'inputs:
  a: a.npy
  q: q.npy
stages:
  - name: score
    foreach: {over: a, size: 100}
    do:
      - qn = q / norm(q, dim=-1, keepdim=true)
      - s = a @ qn.T
      - e = exp(s) + chunk_index
      - t = sum(e, dim=1)
      - u = t * 2
    keep: [t]
  - name: after
    do:
      - total = sum(t)
outputs:
  u: u.npy
  e: e.npy.zst
  total: total.npy'
    run_tensorrun 0 validate p.yaml
    [[ "$output" == *"foreach a by 100 rows (11 blocks):"*"once, before the blocks:"*"qn "*"each block:"*"(each block of the foreach)"*"t "*"after the blocks:"*"write e.npy.zst"* ]]
    [[ "$output" == *"joins %"*" e f32[1024,4] in the pool, made before the first block"* ]]
    [[ "$output" == *"joins %"*" u f32[1024] into u.npy, each block at its rows"* ]]
    [[ "$output" == *"u              f32[1024]"*"-> u.npy"* ]]
    run_tensorrun 0 validate --json p.yaml
    printf '%s' "$output" | "$PY" -c '
import json, sys
p = json.load(sys.stdin)
st = p["stages"][0]
names = {v["id"]: v["name"] for v in p["values"]}
part = {}
for i in st["instructions"]:
    for r in i.get("results", []):
        part[names[r]] = i["part"]
assert part["qn"] == "once" and part["s"] == "block" and part["u"] == "block", part
assert [i["part"] for i in st["instructions"]][-1] == "after"
joins = {names[j["value"]]: (j["into"], j["path"], j["shape"]) for j in st["joins"]}
assert joins == {"e": ("pool", None, [1024, 4]), "t": ("pool", None, [1024]),
                 "u": ("file", "u.npy", [1024])}, joins
assert all(i["part"] is None for i in p["stages"][1]["instructions"])'
}
