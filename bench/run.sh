#!/usr/bin/env bash
# Regenerates the measured table of BENCHMARKS.md in one go, without make:
#
#   bench/run.sh [N]     N instances for the scale rows (default 100000; the recorded
#                        figures use 1000000)
#   BENCH_PARTS="store server api tasks startup cli console"   the parts to run (default all; the
#                        table takes the other parts from their last outputs in bench/out/)
#   BENCH_CONSOLE_N=200000   instances of the console rows (default 200000, whatever N)
#   BENCH_SEARCH_REQS=40                             fewer search requests timed (default: all)
#   BENCH_ENGINE=postgres   the PostgreSQL part instead (bench/run_pg.sh): the same
#                        benchmarks on the cluster at DATASERVICE_TEST_PG, and the nodes'
#                        throughput; it writes its own table and leaves SQLite's alone
#
# Every product figure and its floor come from the same run. Rates are given by the wall
# clock and by the process's CPU time (user + system, getrusage): on a machine shared
# with other work the CPU-time ratio is the steadier one. Where a benchmark runs several
# times (-count), the table gives the median. Raw outputs are kept in
# bench/out/. Each benchmark is bounded (-benchtime counts, -timeout); at 1M on a
# 2-core machine the whole run takes tens of minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BENCH_ENGINE:-sqlite}" = postgres ]; then
	exec bench/run_pg.sh "$@"
fi
N=${1:-100000}
OUT=bench/out
mkdir -p "$OUT"
export BENCH_N=$N
export BENCH_CONSOLE_N=${BENCH_CONSOLE_N:-200000}

. bench/lib.sh # run, metric, ratio, inv

STORE_CMD="go test -run ^\$ -bench LoadScale|ExportScale|SearchIndexLayout|SearchSteadyLoad -benchtime 1x -timeout 3h ./store/"
SERVER_CMD="go test -run ^\$ -bench Scale -benchtime 2000x -count 3 -timeout 3h ./server/"
API_CMD="go test -run ^\$ -bench APILoad -benchtime 1x -timeout 3h ./server/"
TASKS_CMD="go test -run ^\$ -bench Pipeline -benchtime 1x -timeout 3h ./tasks/"
DRY_CMD="go test -run ^\$ -bench Pipeline/.*/(dry|floor-dry)\$ -benchtime 1x -count 5 -timeout 1h ./tasks/"
START_CMD="go test -run ^\$ -bench Startup -benchtime 20x -timeout 30m ./bootstrap/"
CONSOLE_CMD="go test -run ^\$ -bench ConsoleParity -benchtime 2000x -count 3 -timeout 2h ./server/console/"
PARTS=${BENCH_PARTS:-store server api tasks startup cli console}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
has store && run store go test -run '^$' -bench 'LoadScale|ExportScale|SearchIndexLayout|SearchSteadyLoad' -benchtime 1x -timeout 3h ./store/
# 2000 requests per figure, three runs, the median kept: a few hundred requests of a
# tenth of a millisecond are over before the machine's noise averages out.
has server && run server go test -run '^$' -bench 'Scale' -benchtime 2000x -count 3 -timeout 3h ./server/
has api && run api go test -run '^$' -bench 'APILoad' -benchtime 1x -timeout 3h ./server/
has tasks && run tasks go test -run '^$' -bench 'Pipeline' -benchtime 1x -timeout 3h ./tasks/
# The dry run takes seconds at 1M, so a single run is at the mercy of the machine: five of
# each, the median kept.
has tasks && run tasks-dry go test -run '^$' -bench 'Pipeline/.*/(dry|floor-dry)$' -benchtime 1x -count 5 -timeout 1h ./tasks/
has startup && run startup go test -run '^$' -bench 'Startup' -benchtime 20x -timeout 30m ./bootstrap/
# The console's list and detail pages against the API requests reading the same rows,
# 16 clients, the two sides alternating in blocks; three runs, the median kept.
has console && run console go test -run '^$' -bench 'ConsoleParity' -benchtime 2000x -count 3 -timeout 2h ./server/console/

# The CLI load of one YAML file, peak RSS of the whole process from /usr/bin/time.
for p in store server api tasks tasks-dry startup console; do [ -f "$OUT/$p.txt" ] || : >"$OUT/$p.txt"; done
CLI_SECS=0 CLI_KB=0
if has cli; then
go build -o "$OUT/dataservice" .
CLI_DB=$(mktemp -d)/cli.db
awk -v n="$N" 'BEGIN {
	print "- {classname: _schema, keyname: bplain, hostname: {dataformat: string}, port: {dataformat: int}, ip: {dataformat: string}}"
	for (i = 0; i < n; i++)
		printf "- classname: bplain\n  keyname: h%07d\n  hostname: host-%07d.example.org\n  port: %d\n  ip: 10.%d.%d.%d\n", i, i, 1 + i % 65535, int(i / 65536) % 256, int(i / 256) % 256, i % 256
}' >"$OUT/cli-load.yml"
# Only serve and migrate create the database; the load is timed on its own.
"$OUT/dataservice" --db "$CLI_DB" migrate >/dev/null 2>&1
/usr/bin/time -f '%e %M' -o "$OUT/cli-time.txt" "$OUT/dataservice" --db "$CLI_DB" load "$OUT/cli-load.yml" >"$OUT/cli-load.txt" 2>&1
rm -f "$CLI_DB"* "$OUT/cli-load.yml"
fi
# A run without the cli part reports the last CLI load measured, if any.
[ -f "$OUT/cli-time.txt" ] && read -r CLI_SECS CLI_KB <"$OUT/cli-time.txt"

s=server
PP=$(metric $s "page/product" p99-ms); PF=$(metric $s "page/floor" p99-ms)
PPR=$(metric $s "page/product" req/s); PFR=$(metric $s "page/floor" req/s)
SP=$(metric $s "search/product" p99-ms); SF=$(metric $s "search/floor" p99-ms)
SPR=$(metric $s "search/product" req/s); SFR=$(metric $s "search/floor" req/s)
PPC=$(metric $s "page/product" cpu-us/req); PFC=$(metric $s "page/floor" cpu-us/req)
OPC=$(metric $s "one/product" cpu-us/req); OFC=$(metric $s "one/floor" cpu-us/req)
OP=$(metric $s "one/product" req/s); OF=$(metric $s "one/floor" req/s)
OPP=$(metric $s "one/product" p99-ms); OFP=$(metric $s "one/floor" p99-ms)
LP=$(metric store "LoadScale.*product" instances/s); LF=$(metric store "LoadScale.*floor" instances/s)
LR=$(metric store "LoadScale.*product" peak-RSS-MB); LFR=$(metric store "LoadScale.*floor" peak-RSS-MB)
LPN=$(metric store "LoadScale.*without-index" instances/s)
XS=$(metric store "SearchIndexLayout" open-s); XM=$(metric store "SearchIndexLayout" index-MB)
XF=$(metric store "SearchIndexLayout" file-MB)
AY=$(metric api "product-yaml" instances/s); AYF=$(metric api "floor-yaml" instances/s)
AJ=$(metric api "product-json" instances/s); AJF=$(metric api "floor-json" instances/s)
AYR=$(metric api "product-yaml" peak-RSS-MB); AYH=$(metric api "product-yaml" peak-heap-MB)
AJR=$(metric api "product-json" peak-RSS-MB); AJH=$(metric api "product-json" peak-heap-MB)
AYFR=$(metric api "floor-yaml" peak-RSS-MB); AJFR=$(metric api "floor-json" peak-RSS-MB)
EY=$(metric store "ExportScale.*yaml" instances/s); EJ=$(metric store "ExportScale.*json" instances/s)
EF=$(metric store "ExportScale.*floor" instances/s)
EYC=$(metric store "ExportScale.*yaml" instances/cpu-s); EJC=$(metric store "ExportScale.*json" instances/cpu-s)
RPC=$(metric tasks "/real" instances/cpu-s); RFC=$(metric tasks "/floor-2|/floor$" instances/cpu-s)
DPC=$(metric tasks-dry "/dry" instances/cpu-s); DFC=$(metric tasks-dry "/floor-dry" instances/cpu-s)
RP=$(metric tasks "/real" instances/s); RF=$(metric tasks "/floor-2|/floor$" instances/s)
RPN=$(metric tasks "/real-without-index" instances/s)
RFP=$(metric tasks "/floor-physical" instances/s); RFR=$(metric tasks "/floor-revision" instances/s)
RCU=$(metric tasks "/real-[0-9]|/real$" catch-up-rows/s); RCS=$(metric tasks "/real-[0-9]|/real$" catch-up-s)
LCU=$(metric store "LoadScale.*product-[0-9]|LoadScale.*product$" catch-up-rows/s)
LCS=$(metric store "LoadScale.*product-[0-9]|LoadScale.*product$" catch-up-s)
SSW=$(metric store "SearchSteadyLoad" writes/s); SSR=$(metric store "SearchSteadyLoad" max-behind-rows)
SSA=$(metric store "SearchSteadyLoad" max-behind-ms); SSP=$(metric store "SearchSteadyLoad" search-p99-ms)
S10=$(metric $s "search-behind-10000/" p99-ms); S100=$(metric $s "search-behind-100000/" p99-ms)
DP=$(metric tasks-dry "/dry" instances/s); DF=$(metric tasks-dry "/floor-dry" instances/s)
RR=$(metric tasks "/real" peak-RSS-MB)
SE=$(metric startup "StartupEmpty" ns/op); SU=$(metric startup "no_admin_password" ns/op)
SFL=$(metric startup "StartupFloor" ns/op)
CLA=$(metric console "/list" api-req/s); CLC=$(metric console "/list" console-req/s)
CLAP=$(metric console "/list" api-p99-ms); CLCP=$(metric console "/list" console-p99-ms)
CLR=$(metric console "/list" console/api); CLU=$(metric console "/list" cpu-ratio)
CDA=$(metric console "/detail" api-req/s); CDC=$(metric console "/detail" console-req/s)
CDAP=$(metric console "/detail" api-p99-ms); CDCP=$(metric console "/detail" console-p99-ms)
CDR=$(metric console "/detail" console/api); CDU=$(metric console "/detail" cpu-ratio)
CLI_RATE=$(awk -v n="$N" -v s="$CLI_SECS" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "not run" }')
CLI_MB=$(awk -v k="$CLI_KB" 'BEGIN { printf "%.0f", k / 1024 }')

{
	echo "<!-- bench:begin (generated by bench/run.sh $N on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)) -->"
	echo
	echo "| work ($N instances) | product | floor | product / floor | aim |"
	echo "|---|---|---|---|---|"
	echo "| GET a page of 50 (p99; page 1–20 and after= cursors) | ${PP} ms, ${PPR} req/s, ${PPC} µs CPU | ${PF} ms, ${PFR} req/s, ${PFC} µs CPU | $(inv "$PP" "$PF") (p99), $(ratio "$PPR" "$PFR") (req/s), $(inv "$PPC" "$PFC") (CPU) | p99 < 5 ms; ≥ 0.8 |"
	echo "| GET with search= (p99; a 7-digit number) | ${SP} ms, ${SPR} req/s | ${SF} ms, ${SFR} req/s | $(inv "$SP" "$SF") (p99) | p99 < 20 ms |"
	echo "| GET one instance (cached key) | ${OP} req/s, p99 ${OPP} ms, ${OPC} µs CPU | ${OF} req/s, p99 ${OFP} ms, ${OFC} µs CPU | $(ratio "$OP" "$OF") (req/s), $(inv "$OPC" "$OFC") (CPU) | ≥ 0.8 |"
	echo "| load, one YAML file (in process: check + streamed load) | ${LP}/s, peak RSS ${LR} MB | ${LF}/s, ${LFR} MB | $(ratio "$LP" "$LF") | ≥ 0.7, RSS < 150 MB |"
	echo "| \`POST /api/load/\`, one YAML body (received into a file and checked, then loaded as read) | ${AY}/s, peak RSS ${AYR} MB, heap ${AYH} MB | net/http receiving the same bytes + the same INSERTs ${AYF}/s, ${AYFR} MB | $(ratio "$AY" "$AYF") | ≥ 0.7, RSS < 150 MB |"
	echo "| \`POST /api/load/\`, one JSON body (the same) | ${AJ}/s, peak RSS ${AJR} MB, heap ${AJH} MB | ${AJF}/s, ${AJFR} MB | $(ratio "$AJ" "$AJF") | ≥ 0.7, RSS < 150 MB |"
	echo "| CLI \`dataservice load\` of the same size (whole process) | ${CLI_RATE}/s, peak RSS ${CLI_MB} MB | | | RSS < 150 MB |"
	echo "| export --format yaml | ${EY}/s, ${EYC}/CPU-s | JSON export ${EJ}/s, ${EJC}/CPU-s | $(ratio "$EY" "$EJ"), $(ratio "$EYC" "$EJC") (CPU) | ≥ 0.8 |"
	echo "| export --format json | ${EJ}/s | read + decode + encoding/json ${EF}/s | $(ratio "$EJ" "$EF") | |"
	echo "| pipeline real run | ${RP}/s, ${RPC}/CPU-s, peak RSS ${RR} MB | ${RF}/s, ${RFC}/CPU-s | $(ratio "$RP" "$RF"), $(ratio "$RPC" "$RFC") (CPU) | ≥ 0.95 |"
	echo "| pipeline dry run (median of 5) | ${DP}/s, ${DPC}/CPU-s | ${DF}/s, ${DFC}/CPU-s | $(ratio "$DP" "$DF"), $(ratio "$DPC" "$DFC") (CPU) | ≥ 0.85 |"
	echo "| write cost of the search index: load / load without it | ${LP}/s / ${LPN}/s | | $(ratio "$LP" "$LPN") | ≥ 0.9 |"
	echo "| write cost of the search index: pipeline real run / without it | ${RP}/s / ${RPN}/s | | $(ratio "$RP" "$RPN") | ≥ 0.9 |"
	echo "| pipeline real run / physical floor without revision nor index (scan, decode, rules, encode, update) | ${RP}/s / ${RFP}/s | | $(ratio "$RP" "$RFP") | ≥ 0.35 |"
	echo "| pipeline real run / floor with the revision row, no index | ${RP}/s / ${RFR}/s | | $(ratio "$RP" "$RFR") | |"
	echo "| GET with search= (p99), 0 / 10,000 / 100,000 rows (at most N) waiting for the index | ${SP} ms / ${S10} ms / ${S100} ms | | | < 5 ms / < 20 ms / < 0.5 s |"
	echo "| steady writes (8 writers, one instance per transaction through Apply) with the catch-up running: most rows / oldest row behind, search p99 meanwhile | ${SSW} writes/s: ${SSR} rows, ${SSA} ms; search p99 ${SSP} ms | | | < 10,000 rows |"
	echo "| search index catch-up after the pipeline real run (N rows) | ${RCU} rows/s, cleared in ${RCS} s | | | |"
	echo "| search index catch-up after the load (N rows) | ${LCU} rows/s, cleared in ${LCS} s | | | |"
	echo "| first start of a file from before the search index (builds it) | ${XS} s, index ${XM} MB of ${XF} MB | | | |"
	echo "| start-up, up to date, no admin password | $(awk -v x="$SU" 'BEGIN { printf "%.2f ms", x / 1e6 }') | $(awk -v x="$SFL" 'BEGIN { printf "%.3f ms", x / 1e6 }') (3 reads) | $(inv "$SU" "$SFL") | < 30 ms |"
	echo "| console list page \`/data/private/host/?page=50&size=50\` ($BENCH_CONSOLE_N instances, 16 clients) | ${CLC} req/s, p99 ${CLCP} ms | \`GET /api/instances/host/?page=50&size=50\` ${CLA} req/s, p99 ${CLAP} ms | ${CLR} (req/s), ${CLU} (CPU) | ≥ 0.5 |"
	echo "| console detail page ($BENCH_CONSOLE_N instances, 16 clients) | ${CDC} req/s, p99 ${CDCP} ms | \`GET\` of the same instance ${CDA} req/s, p99 ${CDAP} ms | ${CDR} (req/s), ${CDU} (CPU) | ≥ 0.5 |"
	echo "| start-up, empty database (open, bootstrap, blocks) | $(awk -v x="$SE" 'BEGIN { printf "%.1f ms", x / 1e6 }') | | | < 200 ms |"
	echo
	echo "Commands (BENCH_N=$N): \`$STORE_CMD\`; \`$SERVER_CMD\`; \`$API_CMD\`; \`$TASKS_CMD\`; \`$DRY_CMD\`; \`$START_CMD\`; \`BENCH_CONSOLE_N=$BENCH_CONSOLE_N $CONSOLE_CMD\`;"
	echo "CLI: \`dataservice --db x.db migrate\`, then \`/usr/bin/time -f '%e %M' dataservice --db x.db load file.yml\` (file written by bench/run.sh)."
	echo
	echo "<!-- bench:end -->"
} >"$OUT/table.md"

# Splice the table into BENCHMARKS.md between the markers (appended when missing).
splice "$OUT/table.md" '<!-- bench:begin' '<!-- bench:end -->'
cat "$OUT/table.md"
