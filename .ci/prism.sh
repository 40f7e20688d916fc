#!/usr/bin/env bash
# The OpenAPI document against the real server, checked by an independent validating proxy
# (Stoplight Prism, pinned): one `dataservice serve` on 127.0.0.1 with a temp SQLite file,
# one `prism proxy` in front of it, and the call set below through the proxy. Any response
# that does not match the document (status, media type, headers, body) fails the run, as
# does a call the document does not route; request violations fail only the calls that are
# not marked as making them on purpose. At the end every documented (method, path, status)
# must have been answered by at least one call, except the statuses listed in UNREACHABLE.
#
# Usage: .ci/prism.sh [BINARY]   (default ./dataservice; build it with ./build.sh first)
# Needs curl and node/npx (npx fetches the pinned Prism once and caches it).
#
# Why not `prism proxy --errors`: in proxy mode that flag also stops forwarding every request
# with a request violation (Prism answers 401 or 422 itself), so the calls that must reach
# the server with a wrong parameter, no credentials or a bad body could not. Prism reports
# every violation in the `sl-violations` header of its reply instead; this script reads it.
set -euo pipefail
cd "$(dirname "$0")/.."
# The document checked is the one the binary serves (/api/openapi.json, embedded at build).
bin=$(realpath "${1:-./dataservice}")
prism_pkg=@stoplight/prism-cli@5.14.2 # 5.15 and later need Node 24

# Statuses the document declares that one healthy server cannot be made to answer from
# outside: 503 before start-up is done or when 64 credential checks are already waiting,
# 507 on a full disk, 500 on an internal failure (where an operation declares it). Tests
# in server/ cover them (starting up, diskfull, throttle).
UNREACHABLE='^[A-Z]+ [^ ]+ (500|503|507)$'

work=$(mktemp -d)
server_pid="" prism_pid=""
cleanup() {
  local rc=$?
  set +e
  # npx runs Prism as a child process: the proxy has its own process group (setsid), and
  # the whole group is stopped.
  if [ -n "$prism_pid" ]; then kill -- "-$prism_pid" 2>/dev/null; wait "$prism_pid" 2>/dev/null; fi
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
# A TERM or INT (CI's time bound: .ci/run runs this under timeout) ends the run through
# cleanup, so neither the server nor the proxy outlives it.
trap 'exit 124' TERM INT

# free_port prints a port nothing listens on (bounded tries).
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port found" >&2; return 1
}
# wait_for URL WHAT: up to 60 s for URL to answer anything.
wait_for() {
  for _ in $(seq 1 120); do
    if curl -s --max-time 5 -o /dev/null "$1"; then return; fi
    sleep 0.5
  done
  echo "$2 did not come up; its log:" >&2; cat "$work/$2.log" >&2; return 1
}

sport=$(free_port)
pport=$(free_port)
S=http://127.0.0.1:$sport
P=http://127.0.0.1:$pport
admin_pw=prism-admin-$RANDOM$RANDOM
SERVICE_DB=$work/prism.db SERVICE_LISTEN=127.0.0.1:$sport SERVICE_ADMIN_PASSWORD=$admin_pw \
  SERVICE_BACKUP=off SERVICE_ACCESS_LOG=off "$bin" serve >"$work/server.log" 2>&1 &
server_pid=$!
wait_for "$S/readyz" server
curl -sf --max-time 30 "$S/api/openapi.json" >"$work/openapi.json"
# Fetched (first run) and cached before the proxy starts, so its start is not the download.
npx --yes "$prism_pkg" --version >/dev/null
setsid npx --yes "$prism_pkg" proxy --port "$pport" --cors=false --errors=false -v warn \
  "$work/openapi.json" "$S" >"$work/prism.log" 2>&1 &
prism_pid=$!
wait_for "$P/healthz" prism

failures=0 calls=0
: >"$work/covered"
# call STATUS KIND "METHOD /path/template" curl-arguments...
# KIND is ok (a valid request: any violation fails it), bad (the request breaks the
# document on purpose: only response violations fail it) or direct (a call to the server
# itself, not through the proxy: only its status is checked).
call() {
  local want=$1 kind=$2 op=$3
  shift 3
  calls=$((calls + 1))
  local code viol problem=""
  # Each call is bounded (the largest, a 33 MiB body, takes a few seconds).
  code=$(curl -sS --max-time 120 -o "$work/body" -D "$work/headers" -w '%{http_code}' "$@") || code=000
  viol=$(tr -d '\r' <"$work/headers" | sed -n 's/^[Ss][Ll]-[Vv]iolations: //p')
  if [ "$code" != "$want" ]; then
    problem="status $code, want $want"
  elif [ -n "$viol" ]; then
    if [[ $viol == *'"location":["response"'* || $viol == *'Selected route not found'* || $viol == 'Too many'* ]]; then
      problem="response violation"
    elif [ "$kind" = ok ]; then
      problem="request violation in a call meant to be valid"
    fi
  fi
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "FAIL $op ($kind) -> $code: $problem"
    [ -n "$viol" ] && echo "  sl-violations: $viol"
    echo "  content-type: $(tr -d '\r' <"$work/headers" | sed -n 's/^[Cc]ontent-[Tt]ype: //p')"
    echo "  body: $(head -c 300 "$work/body")"
  fi
  echo "$op $code" >>"$work/covered"
}
body() { cat "$work/body"; }

A=(-u "admin:$admin_pw")
Y=(-H 'Accept: application/yaml')
json=(-H 'Content-Type: application/json')
yaml=(-H 'Content-Type: application/yaml')

# The fixture: schemas, an instance, a pipeline, users and keys with too few permissions.
fixture='
- {classname: _permission, keyname: p_vault_read}
- {classname: _schema, keyname: host, name: {dataformat: string}, note: {dataformat: string}, port: {dataformat: int}}
- {classname: _schema, keyname: vault, p_read: p_vault_read, code: {dataformat: string}}
- {classname: host, keyname: web1, name: Web 1}
- {classname: _pipeline, keyname: touch, content: "- field_append: [\"\", note, X]\n"}
- {classname: _schedule, keyname: nightly, pipeline: touch, schemas: [host], cron: "0 3 * * *", timezone: Europe/Paris}
- {classname: _user, keyname: plain, password: plain-pass-1}
- {classname: _user, keyname: reader, password: reader-pass-1}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read, p_pipeline_run], users: [reader]}
- {classname: _apikey, keyname: noread, secret: noread-secret-1, permissions: [p_data_access]}
- {classname: _apikey, keyname: ro, secret: ro-secret-1, is_readonly: true,
   permissions: [p_data_access, p_data_read, p_pipeline_run, p_api_load, p_api_rawfile, p_api_conf, p_conf_admin]}
'
call 200 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary "$fixture" "$P/api/load/"
grep -q '"errors":0' "$work/body" || { echo "fixture load failed: $(body)"; exit 1; }

plain=(-u plain:plain-pass-1)
reader=(-u reader:reader-pass-1)
ro=(-H 'Authorization: Bearer ro:ro-secret-1')

# Health, index, documentation: no credentials.
for p in /healthz /readyz /api/ /api/ping/; do
  call 200 ok "GET $p" "$P$p"
  call 200 ok "GET $p" "$P$p?format=yaml"
  call 200 ok "GET $p" "${Y[@]}" "$P$p"
done
call 200 ok "GET /api/openapi.json" "$P/api/openapi.json"
call 200 ok "GET /api/docs/" "$P/api/docs/"
call 200 ok "GET /api/docs/app.js" "$P/api/docs/app.js"
call 404 ok "GET /api/docs/{file}" "$P/api/docs/nothing.css"

# Authenticated reads: 200 (JSON and YAML), 401, 403.
call 200 ok "GET /api/version/" "${A[@]}" "$P/api/version/"
call 200 ok "GET /api/version/" "${A[@]}" "$P/api/version/?format=yaml"
call 401 bad "GET /api/version/" "$P/api/version/"
call 401 bad "GET /api/version/" "${Y[@]}" "$P/api/version/"
for p in /api/pipelines/ /api/tasks/ /api/schedules/ /api/schemas/ /api/schemas/host/ /api/instances/host/ /api/instances/host/web1/ /api/conf/; do
  t=$p
  case $p in
    /api/schemas/host/) t=/api/schemas/{name}/ ;;
    /api/instances/host/) t=/api/instances/{schema}/ ;;
    /api/instances/host/web1/) t=/api/instances/{schema}/{keyname}/ ;;
  esac
  call 200 ok "GET $t" "${A[@]}" "$P$p"
  call 200 ok "GET $t" "${A[@]}" "$P$p?format=yaml"
  call 200 ok "GET $t" "${A[@]}" "${Y[@]}" "$P$p"
  call 401 bad "GET $t" "$P$p"
  call 403 ok "GET $t" "${plain[@]}" "$P$p"
  call 403 ok "GET $t" "${plain[@]}" "${Y[@]}" "$P$p"
done
call 403 ok "GET /api/schemas/{name}/" "${reader[@]}" "$P/api/schemas/vault/"
call 404 ok "GET /api/schemas/{name}/" "${A[@]}" "$P/api/schemas/nothing/"
call 404 ok "GET /api/instances/{schema}/" "${A[@]}" "$P/api/instances/nothing/"
call 403 ok "GET /api/instances/{schema}/" "${reader[@]}" "$P/api/instances/vault/"
call 400 bad "GET /api/instances/{schema}/" "${A[@]}" "$P/api/instances/host/?size=0"
call 400 bad "GET /api/instances/{schema}/" "${A[@]}" "$P/api/instances/host/?count=some&format=yaml"
call 404 ok "GET /api/instances/{schema}/{keyname}/" "${A[@]}" "$P/api/instances/host/nothing/"
call 404 ok "GET /api/instances/{schema}/{keyname}/" "${A[@]}" "$P/api/instances/host/nothing/?format=yaml"
call 403 ok "GET /api/instances/{schema}/{keyname}/" "${reader[@]}" "$P/api/instances/vault/x/"
call 400 bad "GET /api/tasks/" "${A[@]}" "$P/api/tasks/?status=sleeping"
call 400 bad "GET /api/tasks/" "${A[@]}" "$P/api/tasks/?limit=0"
call 403 ok "GET /api/conf/" "${reader[@]}" "$P/api/conf/"
# Schedules: a key with p_data_access but not the read permission of _schedule.
call 403 ok "GET /api/schedules/" -H 'Authorization: Bearer noread:noread-secret-1' "$P/api/schedules/"

# Pipelines: a run (202), its task, then the other methods (405 after the permission check).
call 202 ok "POST /api/pipelines/{pipeline}/" "${A[@]}" -X POST "$P/api/pipelines/touch/?schema=host&dryrun=1"
handle=$(sed -n 's/.*"handle":"\([^"]*\)".*/\1/p' "$work/body")
[ -n "$handle" ] || { echo "no task handle in $(body)"; exit 1; }
call 202 ok "POST /api/pipelines/{pipeline}/" "${A[@]}" -X POST "$P/api/pipelines/touch/?schema=host&dryrun=1&format=yaml"
call 400 bad "POST /api/pipelines/{pipeline}/" "${A[@]}" -X POST "$P/api/pipelines/touch/"
call 400 ok "POST /api/pipelines/{pipeline}/" "${A[@]}" -X POST "$P/api/pipelines/touch/?schema=nothing"
call 404 ok "POST /api/pipelines/{pipeline}/" "${A[@]}" -X POST "$P/api/pipelines/nothing/?schema=host"
call 401 bad "POST /api/pipelines/{pipeline}/" -X POST "$P/api/pipelines/touch/?schema=host"
call 403 ok "POST /api/pipelines/{pipeline}/" "${plain[@]}" -X POST "$P/api/pipelines/touch/?schema=host"
call 403 ok "POST /api/pipelines/{pipeline}/" "${ro[@]}" -X POST "$P/api/pipelines/touch/?schema=host"
for m in PUT PATCH DELETE HEAD OPTIONS; do
  # Prism cannot relay the reply to a HEAD request (it parses the empty body as JSON and
  # answers 500 itself): those go to the server directly.
  x=(-X "$m") via=ok base=$P
  [ "$m" = HEAD ] && x=(-I) via=direct base=$S
  for p in /api/pipelines/ /api/pipelines/touch/; do
    t=/api/pipelines/
    [ "$p" = /api/pipelines/touch/ ] && t=/api/pipelines/{pipeline}/
    call 405 "$via" "$m $t" "${A[@]}" "${x[@]}" "$base$p"
    call 401 "${via/ok/bad}" "$m $t" "${x[@]}" "$base$p"
    call 403 "$via" "$m $t" "${plain[@]}" "${x[@]}" "$base$p"
  done
done
call 405 ok "POST /api/pipelines/" "${A[@]}" -X POST "$P/api/pipelines/"
call 405 ok "GET /api/pipelines/{pipeline}/" "${A[@]}" "$P/api/pipelines/touch/?format=yaml"
call 401 bad "POST /api/pipelines/" -X POST "$P/api/pipelines/"
call 401 bad "GET /api/pipelines/" "$P/api/pipelines/"
call 403 ok "POST /api/pipelines/" "${plain[@]}" -X POST "$P/api/pipelines/"
call 401 bad "GET /api/pipelines/{pipeline}/" "$P/api/pipelines/touch/"
call 403 ok "GET /api/pipelines/{pipeline}/" "${plain[@]}" "$P/api/pipelines/touch/"

# Tasks.
call 200 ok "GET /api/tasks/{handle}/" "${A[@]}" "$P/api/tasks/$handle/"
call 200 ok "GET /api/tasks/{handle}/" "${A[@]}" "$P/api/tasks/$handle/?format=yaml"
call 404 ok "GET /api/tasks/{handle}/" "${A[@]}" "$P/api/tasks/nothing/"
call 404 ok "GET /api/tasks/{handle}/" "${reader[@]}" "$P/api/tasks/$handle/"
call 401 bad "GET /api/tasks/{handle}/" "$P/api/tasks/$handle/"
call 403 ok "GET /api/tasks/{handle}/" "${plain[@]}" "$P/api/tasks/$handle/"
call 200 ok "POST /api/tasks/{handle}/cancel/" "${A[@]}" -X POST "$P/api/tasks/$handle/cancel/"
call 200 ok "POST /api/tasks/{handle}/cancel/" "${A[@]}" -X POST "$P/api/tasks/$handle/cancel/?format=yaml"
call 404 ok "POST /api/tasks/{handle}/cancel/" "${A[@]}" -X POST "$P/api/tasks/nothing/cancel/"
call 401 bad "POST /api/tasks/{handle}/cancel/" -X POST "$P/api/tasks/$handle/cancel/"
call 403 ok "POST /api/tasks/{handle}/cancel/" "${plain[@]}" -X POST "$P/api/tasks/$handle/cancel/"
call 403 ok "POST /api/tasks/{handle}/cancel/" "${ro[@]}" -X POST "$P/api/tasks/$handle/cancel/"

# Loads: YAML and JSON documents, CSV, their refusals; 413 by too many entries or rows.
call 200 ok "POST /api/load/" "${A[@]}" "${json[@]}" --data-binary '[{"classname":"host","keyname":"web2"}]' "$P/api/load/?format=yaml"
call 200 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary '- {classname: host, keyname: web3}' "$P/api/load/?dryrun=1"
call 400 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary 'a: [unclosed' "$P/api/load/"
call 400 bad "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary '- {classname: host, keyname: web4}' "$P/api/load/?action=explode"
call 404 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary '- {classname: host, keyname: web4}' "$P/api/load/?pipeline=nothing"
call 401 bad "POST /api/load/" "${yaml[@]}" --data-binary '[]' "$P/api/load/"
call 403 ok "POST /api/load/" "${plain[@]}" "${yaml[@]}" --data-binary '[]' "$P/api/load/"
call 403 ok "POST /api/load/" "${ro[@]}" "${yaml[@]}" --data-binary '[]' "$P/api/load/"
seq 0 100000 | sed 's/^/- {classname: host, keyname: h/; s/$/}/' >"$work/many.yaml"
call 413 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary "@$work/many.yaml" "$P/api/load/"
csv=(-H 'Content-Type: text/csv')
call 200 ok "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary $'keyname;name\nweb5;Web 5\n' "$P/api/rawfile/?schema=host"
call 200 ok "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary $'keyname,name\nweb6,Web 6\n' "$P/api/rawfile/?schema=host&delimiter=,&format=yaml"
call 400 bad "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/"
call 400 bad "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/?schema=host&encoding=ebcdic"
call 404 ok "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/?schema=host&pipeline=nothing"
call 401 bad "POST /api/rawfile/" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/?schema=host"
call 403 ok "POST /api/rawfile/" "${plain[@]}" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/?schema=host"
call 403 ok "POST /api/rawfile/" "${ro[@]}" "${csv[@]}" --data-binary $'keyname\nweb7\n' "$P/api/rawfile/?schema=host"
{ echo keyname; seq 0 100000 | sed 's/^/r/'; } >"$work/many.csv"
call 413 ok "POST /api/rawfile/" "${A[@]}" "${csv[@]}" --data-binary "@$work/many.csv" "$P/api/rawfile/?schema=host"

# Configuration changes.
call 200 ok "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary '{"GLOBAL_APPNAME":"prism"}' "$P/api/conf/"
call 200 ok "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary '{"GLOBAL_APPNAME":"prism"}' "$P/api/conf/?format=yaml"
call 400 ok "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary '{"NO_SUCH_KEY":"1"}' "$P/api/conf/"
call 400 bad "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary '[1]' "$P/api/conf/"
call 401 bad "POST /api/conf/" "${json[@]}" --data-binary '{}' "$P/api/conf/"
call 403 ok "POST /api/conf/" "${reader[@]}" "${json[@]}" --data-binary '{"GLOBAL_APPNAME":"x"}' "$P/api/conf/"
call 403 ok "POST /api/conf/" "${ro[@]}" "${json[@]}" --data-binary '{"GLOBAL_APPNAME":"x"}' "$P/api/conf/"
# Only a body over 32 MiB gets this 413, and Prism reads at most 10 MB of a request body
# (answering 413 itself beyond): it goes to the server directly.
head -c $((33 << 20)) /dev/zero | tr '\0' ' ' >"$work/big.json"
call 413 direct "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary "@$work/big.json" "$S/api/conf/"

# One-instance writes (POST on a schema's path; PUT, PATCH and DELETE on an instance's),
# when the document declares them.
declares() { # declares METHOD PATH: the document has the operation
  node -e 'const d = require(process.argv[1]); const p = d.paths[process.argv[3]];
    process.exit(p && p[process.argv[2]] ? 0 : 1)' "$work/openapi.json" "$1" "$2"
}
if declares post /api/instances/{schema}/; then
  rest_writes=1
  I=/api/instances
  # A YAML body over the 8 MiB YAML bound and under Prism's 10 MB (a JSON one would need 32 MiB).
  { printf 'keyname: big\nnote: '; head -c $((9 << 20)) /dev/zero | tr '\0' x; echo; } >"$work/big.yaml"
  txt=(-H 'Content-Type: text/plain')
  mp=(-H 'Content-Type: application/merge-patch+json')
  c="POST $I/{schema}/"
  call 201 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest1","name":"Rest 1","port":80}' "$P$I/host/"
  grep -qi '^location: /api/instances/host/rest1/' "$work/headers" || { echo "FAIL $c: no Location"; failures=$((failures + 1)); }
  call 201 ok "$c" "${A[@]}" "${yaml[@]}" --data-binary $'keyname: rest2\nname: Rest 2\n' "$P$I/host/?format=yaml"
  call 201 ok "$c" "${A[@]}" "${json[@]}" "${Y[@]}" --data-binary '{"keyname":"rest3"}' "$P$I/host/"
  call 200 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/?dryrun=1"
  call 200 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/?dryrun=1&format=yaml"
  call 400 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest4","port":"many"}' "$P$I/host/"
  call 400 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest4","nofield":1}' "$P$I/host/?format=yaml"
  call 401 bad "$c" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/"
  call 403 ok "$c" "${plain[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/"
  call 403 ok "$c" "${ro[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/"
  call 403 ok "$c" "${reader[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/host/"
  call 404 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"rest4"}' "$P$I/nothing/"
  call 409 ok "$c" "${A[@]}" "${json[@]}" --data-binary '{"keyname":"web1"}' "$P$I/host/"
  call 413 ok "$c" "${A[@]}" "${yaml[@]}" --data-binary "@$work/big.yaml" "$P$I/host/"
  call 415 bad "$c" "${A[@]}" "${txt[@]}" --data-binary 'keyname=rest4' "$P$I/host/"
  etag=$(curl -s --max-time 30 -D - -o /dev/null "${A[@]}" "$S$I/host/rest1/" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
  [ -n "$etag" ] || { echo "no ETag on GET $I/host/rest1/"; exit 1; }
  for m in PUT PATCH; do
    c="$m $I/{schema}/{keyname}/"
    ct=("${json[@]}")
    [ "$m" = PATCH ] && ct=("${mp[@]}")
    call 200 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" -H "If-Match: $etag" --data-binary '{"keyname":"rest1","name":"Rest one"}' "$P$I/host/rest1/"
    etag=$(tr -d '\r' <"$work/headers" | sed -n 's/^[Ee][Tt]ag: //p')
    call 200 ok "$c" "${A[@]}" "${yaml[@]}" -X "$m" --data-binary $'keyname: rest2\nname: Rest two\n' "$P$I/host/rest2/?format=yaml"
    call 200 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" --data-binary '{"keyname":"rest2","port":8080}' "$P$I/host/rest2/?dryrun=1"
    call 400 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" -H 'If-Match: no-quotes' --data-binary '{"keyname":"rest1"}' "$P$I/host/rest1/"
    call 400 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" --data-binary '{"keyname":"rest1","port":"many"}' "$P$I/host/rest1/?format=yaml"
    call 401 bad "$c" "${ct[@]}" -X "$m" --data-binary '{}' "$P$I/host/rest1/"
    call 403 ok "$c" "${plain[@]}" "${ct[@]}" -X "$m" --data-binary '{}' "$P$I/host/rest1/"
    call 403 ok "$c" "${ro[@]}" "${ct[@]}" -X "$m" --data-binary '{}' "$P$I/host/rest1/"
    call 403 ok "$c" "${reader[@]}" "${ct[@]}" -X "$m" --data-binary '{"keyname":"rest1"}' "$P$I/host/rest1/"
    call 404 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" --data-binary '{"keyname":"nothing"}' "$P$I/host/nothing/"
    call 409 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" --data-binary '{"keyname":"web1"}' "$P$I/host/rest1/"
    call 412 ok "$c" "${A[@]}" "${ct[@]}" -X "$m" -H 'If-Match: "0000"' --data-binary '{"keyname":"rest1"}' "$P$I/host/rest1/"
    call 413 ok "$c" "${A[@]}" "${yaml[@]}" -X "$m" --data-binary "@$work/big.yaml" "$P$I/host/rest1/"
    call 415 bad "$c" "${A[@]}" "${txt[@]}" -X "$m" --data-binary 'name=x' "$P$I/host/rest1/"
  done
  c="DELETE $I/{schema}/{keyname}/"
  call 200 ok "$c" "${A[@]}" -X DELETE "$P$I/host/rest3/?dryrun=1&format=yaml"
  call 200 ok "$c" "${A[@]}" -X DELETE -H 'If-Match: *' "$P$I/host/rest3/"
  call 200 ok "$c" "${A[@]}" "${Y[@]}" -X DELETE "$P$I/host/rest2/"
  call 400 ok "$c" "${A[@]}" -X DELETE -H 'If-Match: no-quotes' "$P$I/host/rest1/"
  call 401 bad "$c" -X DELETE "$P$I/host/rest1/"
  call 403 ok "$c" "${plain[@]}" -X DELETE "$P$I/host/rest1/"
  call 403 ok "$c" "${ro[@]}" -X DELETE "$P$I/host/rest1/"
  call 403 ok "$c" "${reader[@]}" -X DELETE "$P$I/host/rest1/"
  call 404 ok "$c" "${A[@]}" -X DELETE "$P$I/host/nothing/"
  call 412 ok "$c" "${A[@]}" -X DELETE -H 'If-Match: "0000"' "$P$I/host/rest1/"
  # POST on an instance's path, PUT, PATCH or DELETE on a schema's: the permission check,
  # then 405 (when the document declares these operations).
  if declares post /api/instances/{schema}/{keyname}/; then
    rest_405=1
    for m in POST PUT PATCH DELETE; do
      p=$I/host/ t2="$m $I/{schema}/"
      [ "$m" = POST ] && p=$I/host/rest1/ t2="$m $I/{schema}/{keyname}/"
      call 405 ok "$t2" "${A[@]}" -X "$m" "$P$p"
      call 401 bad "$t2" -X "$m" "$P$p"
      call 403 ok "$t2" "${plain[@]}" -X "$m" "$P$p"
    done
  fi
fi

# The web console. Prism's proxy follows redirects itself (and drops their Set-Cookie), so
# the calls whose answer is a redirect (303) go to the server directly: their status is
# still checked against the document (the coverage check at the end; "direct" in the
# FAIL lines), their body is empty.
jar=$work/cookies
origin=(-H "Origin: $S")
csrf_of() { sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' "$work/body" | head -1; }
call 200 ok "GET /" -H 'Accept: application/json' "$P/"
call 200 ok "GET /" -H 'Accept: application/yaml' "$P/"
call 200 ok "GET /" "$P/?format=yaml"
call 303 direct "GET /" -H 'Accept: text/html' "$S/"
call 200 ok "GET /login" "$P/login"
call 403 ok "POST /login" --data-urlencode login=admin --data-urlencode "password=$admin_pw" "$P/login"
call 401 ok "POST /login" "${origin[@]}" --data-urlencode login=admin --data-urlencode password=wrong "$P/login"
call 303 direct "POST /login" -c "$jar" "${origin[@]}" --data-urlencode login=admin --data-urlencode "password=$admin_pw" "$S/login"
call 303 direct "GET /login" -b "$jar" "$S/login"
call 200 ok "GET /" -b "$jar" -H 'Accept: text/html' "$P/"
call 200 ok "GET /data/private/{page}/" -b "$jar" "$P/data/private/host/"
call 404 ok "GET /data/private/{page}/" -b "$jar" "$P/data/private/nothing/"
call 303 direct "GET /data/private/{page}/" "$S/data/private/host/"
call 200 ok "GET /data/private/{schema}/{keyname}/" -b "$jar" "$P/data/private/host/web1/"
call 404 ok "GET /data/private/{schema}/{keyname}/" -b "$jar" "$P/data/private/host/nothing/"
call 303 direct "GET /data/private/{schema}/{keyname}/" "$S/data/private/host/web1/"
call 200 ok "GET /data/private/{page}/" -b "$jar" "$P/data/private/configuration/"
csrf=$(csrf_of)
[ -n "$csrf" ] || { echo "no CSRF token on the configuration page"; exit 1; }
call 303 direct "POST /data/private/{page}/" -b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" --data-urlencode v_GLOBAL_APPNAME=console "$S/data/private/configuration/"
call 400 ok "POST /data/private/{page}/" -b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" --data-urlencode v_QUEUE_MAX=0 "$P/data/private/configuration/"
call 403 bad "POST /data/private/{page}/" -b "$jar" "${origin[@]}" --data-urlencode v_QUEUE_MAX=5 "$P/data/private/configuration/"
call 401 ok "POST /data/private/{page}/" "${origin[@]}" --data-urlencode csrf=none "$P/data/private/configuration/"
call 200 ok "GET /data/private/{schema}/{keyname}/" -b "$jar" "$P/data/private/host/web1/?do=edit"
call 405 ok "POST /data/private/{page}/" -b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" "$P/data/private/host/"
call 200 ok "POST /data/private/{page}/" -b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" --data-urlencode do=check \
  --data-urlencode format=yaml --data-urlencode "text=- {classname: host, keyname: web9}" "$P/data/private/import/"
edit=(-b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" --data-urlencode displayname= --data-urlencode is_enabled=true)
call 303 direct "POST /data/private/{schema}/{keyname}/" "${edit[@]}" --data-urlencode "f_name=Web one" "$S/data/private/host/web1/?do=edit"
call 400 ok "POST /data/private/{schema}/{keyname}/" "${edit[@]}" --data-urlencode "f_port=many" "$P/data/private/host/web1/?do=edit"
call 400 ok "POST /data/private/{schema}/{keyname}/" "${edit[@]}" "$P/data/private/host/web1/?do=nothing"
call 403 bad "POST /data/private/{schema}/{keyname}/" -b "$jar" "${origin[@]}" --data-urlencode displayname=x "$P/data/private/host/web1/?do=edit"
call 401 ok "POST /data/private/{schema}/{keyname}/" "${origin[@]}" --data-urlencode csrf=none "$P/data/private/host/web1/?do=edit"
call 404 ok "POST /data/private/{schema}/{keyname}/" "${edit[@]}" "$P/data/private/host/nothing/?do=edit"
pjar=$work/plain-cookies
call 303 direct "POST /login" -c "$pjar" "${origin[@]}" --data-urlencode login=plain --data-urlencode password=plain-pass-1 "$S/login"
call 403 ok "GET /data/private/{page}/" -b "$pjar" "$P/data/private/configuration/"
call 403 ok "GET /data/private/{schema}/{keyname}/" -b "$pjar" "$P/data/private/host/web1/"
call 200 ok "GET /static/{file}" "$P/static/console.css"
call 200 ok "GET /static/{file}" "$P/static/console.js"
call 404 ok "GET /static/{file}" "$P/static/nothing.css"
call 403 bad "POST /logout" -b "$jar" -X POST "$P/logout"
call 401 ok "POST /logout" "${origin[@]}" --data-urlencode csrf=none "$P/logout"
call 303 direct "POST /logout" -b "$jar" "${origin[@]}" --data-urlencode "csrf=$csrf" "$S/logout"

# Events: a webhook rule whose receiver is refused (loopback, WEBHOOK_ALLOW_PRIVATE empty)
# gives a dead event after its one attempt; a pipeline rule's event is delivered once its
# task is queued. Then the list and redelivery (409 for the delivered one).
call 200 ok "POST /api/conf/" "${A[@]}" "${json[@]}" --data-binary '{"WEBHOOK_MAX_ATTEMPTS":"1"}' "$P/api/conf/"
events='
- {classname: _schema, keyname: probe, note: {dataformat: string}}
- {classname: _eventrule, keyname: refused, schemas: [probe], actions: [create], webhook_url: "http://127.0.0.1:9/hook", secret: prism-hook-secret}
- {classname: _eventrule, keyname: runs, schemas: [probe], actions: [create], pipeline: touch}
- {classname: probe, keyname: p1}
'
call 200 ok "POST /api/load/" "${A[@]}" "${yaml[@]}" --data-binary "$events" "$P/api/load/"
grep -q '"errors":0' "$work/body" || { echo "events fixture load failed: $(body)"; exit 1; }
# event_id STATUS RULE: the id of the rule's newest event once it has that status (60 s at most).
event_id() {
  local id=""
  for _ in $(seq 1 120); do
    id=$(curl -s --max-time 10 "${A[@]}" "$S/api/events/?status=$1&rule=$2&limit=1" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
    [ -n "$id" ] && { echo "$id"; return; }
    sleep 0.5
  done
  echo "no $1 event of rule $2 after 60 s; server log:" >&2; tail -20 "$work/server.log" >&2; return 1
}
dead=$(event_id dead refused)
delivered=$(event_id delivered runs)
call 200 ok "GET /api/events/" "${A[@]}" "$P/api/events/"
call 200 ok "GET /api/events/" "${A[@]}" "$P/api/events/?status=dead&rule=refused&limit=5&format=yaml"
call 200 ok "GET /api/events/" "${A[@]}" "${Y[@]}" "$P/api/events/?status=delivered"
call 400 bad "GET /api/events/" "${A[@]}" "$P/api/events/?status=lost"
call 400 bad "GET /api/events/" "${A[@]}" "$P/api/events/?limit=0"
call 401 bad "GET /api/events/" "$P/api/events/"
call 403 ok "GET /api/events/" "${plain[@]}" "$P/api/events/"
call 403 ok "GET /api/events/" "${reader[@]}" "$P/api/events/"
call 200 ok "POST /api/events/{id}/redeliver/" "${A[@]}" -X POST "$P/api/events/$dead/redeliver/"
call 409 ok "POST /api/events/{id}/redeliver/" "${A[@]}" -X POST "$P/api/events/$delivered/redeliver/"
call 409 ok "POST /api/events/{id}/redeliver/" "${A[@]}" -X POST "$P/api/events/$delivered/redeliver/?format=yaml"
call 404 ok "POST /api/events/{id}/redeliver/" "${A[@]}" -X POST "$P/api/events/nothing/redeliver/"
call 401 bad "POST /api/events/{id}/redeliver/" -X POST "$P/api/events/$dead/redeliver/"
call 403 ok "POST /api/events/{id}/redeliver/" "${plain[@]}" -X POST "$P/api/events/$dead/redeliver/"
call 403 ok "POST /api/events/{id}/redeliver/" "${ro[@]}" -X POST "$P/api/events/$dead/redeliver/"

# The credential throttle last: refused credentials of ever new logins until the address
# reaches its limit (20 refusals within 15 minutes; the console's wrong sign-in above was
# one), then every authenticated route answers 429 without checking the credentials.
t=(-u throttled:wrong)
for i in $(seq 1 30); do
  code=$(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -u "refused$i:wrong" "$P/api/version/")
  [ "$code" = 429 ] && break
  [ "$code" = 401 ] || { echo "FAIL refused credentials: $code"; exit 1; }
done
[ "$code" = 429 ] || { echo "FAIL: 30 refused credentials and no 429"; exit 1; }
call 429 ok "GET /api/version/" "${t[@]}" "$P/api/version/"
call 429 ok "GET /api/version/" "${t[@]}" "$P/api/version/?format=yaml"
for p in /api/pipelines/ /api/tasks/ /api/schedules/ /api/schemas/ /api/schemas/host/ /api/instances/host/ /api/instances/host/web1/ /api/conf/ \
  "/api/tasks/$handle/" /api/events/; do
  t2=$p
  case $p in
    /api/schemas/host/) t2=/api/schemas/{name}/ ;;
    /api/instances/host/) t2=/api/instances/{schema}/ ;;
    /api/instances/host/web1/) t2=/api/instances/{schema}/{keyname}/ ;;
    "/api/tasks/$handle/") t2=/api/tasks/{handle}/ ;;
  esac
  call 429 ok "GET $t2" "${t[@]}" "$P$p"
done
for m in POST PUT PATCH DELETE HEAD OPTIONS; do
  x=(-X "$m") via=ok base=$P
  [ "$m" = HEAD ] && x=(-I) via=direct base=$S
  call 429 "$via" "$m /api/pipelines/" "${t[@]}" "${x[@]}" "$base/api/pipelines/"
  [ "$m" = POST ] || call 429 "$via" "$m /api/pipelines/{pipeline}/" "${t[@]}" "${x[@]}" "$base/api/pipelines/touch/"
done
call 429 ok "POST /api/pipelines/{pipeline}/" "${t[@]}" -X POST "$P/api/pipelines/touch/?schema=host"
call 429 ok "GET /api/pipelines/{pipeline}/" "${t[@]}" "$P/api/pipelines/touch/"
call 429 ok "POST /api/tasks/{handle}/cancel/" "${t[@]}" -X POST "$P/api/tasks/$handle/cancel/"
call 429 ok "POST /api/events/{id}/redeliver/" "${t[@]}" -X POST "$P/api/events/$dead/redeliver/"
call 429 ok "POST /api/load/" "${t[@]}" "${yaml[@]}" --data-binary '[]' "$P/api/load/"
call 429 ok "POST /api/rawfile/" "${t[@]}" "${csv[@]}" --data-binary $'keyname\nx\n' "$P/api/rawfile/?schema=host"
call 429 ok "POST /api/conf/" "${t[@]}" "${json[@]}" --data-binary '{"GLOBAL_APPNAME":"x"}' "$P/api/conf/"
call 429 ok "POST /login" -b "$jar" "${origin[@]}" --data-urlencode login=throttled --data-urlencode password=wrong "$P/login"
if [ -n "${rest_writes:-}" ]; then
  call 429 ok "POST /api/instances/{schema}/" "${t[@]}" "${json[@]}" --data-binary '{"keyname":"x"}' "$P/api/instances/host/"
  call 429 ok "PUT /api/instances/{schema}/{keyname}/" "${t[@]}" "${json[@]}" -X PUT --data-binary '{}' "$P/api/instances/host/web1/"
  call 429 ok "PATCH /api/instances/{schema}/{keyname}/" "${t[@]}" "${json[@]}" -X PATCH --data-binary '{}' "$P/api/instances/host/web1/"
  call 429 ok "DELETE /api/instances/{schema}/{keyname}/" "${t[@]}" -X DELETE "$P/api/instances/host/web1/"
  if [ -n "${rest_405:-}" ]; then
    call 429 ok "POST /api/instances/{schema}/{keyname}/" "${t[@]}" -X POST "$P/api/instances/host/web1/"
    for m in PUT PATCH DELETE; do
      call 429 ok "$m /api/instances/{schema}/" "${t[@]}" -X "$m" "$P/api/instances/host/"
    done
  fi
fi

# Coverage: every documented (method, path, status) was answered by some call.
node -e '
const doc = require(process.argv[1]);
for (const [path, item] of Object.entries(doc.paths))
  for (const [method, op] of Object.entries(item))
    if (op && op.responses) for (const status of Object.keys(op.responses))
      console.log(method.toUpperCase() + " " + path + " " + status);
' "$work/openapi.json" | sort -u >"$work/documented"
sort -u "$work/covered" >"$work/answered"
missing=$(comm -23 "$work/documented" "$work/answered" | grep -Ev "$UNREACHABLE" || true)
undocumented=$(comm -13 "$work/documented" "$work/answered" || true)
echo "prism: $calls calls, $failures failed; $(wc -l <"$work/documented") documented statuses"
if [ -n "$missing" ]; then
  echo "documented but answered by no call:"; echo "$missing"; failures=$((failures + 1))
fi
if [ -n "$undocumented" ]; then
  echo "answered but not documented:"; echo "$undocumented"; failures=$((failures + 1))
fi
if [ "$failures" -ne 0 ]; then
  echo "-- prism log (violations)"; grep -i 'violation\|error' "$work/prism.log" | head -50 || true
  exit 1
fi
