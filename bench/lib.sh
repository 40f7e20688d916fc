# Shared by bench/run.sh and bench/run_pg.sh (sourced; OUT is the output directory).

run() { # name command...
	local name=$1
	shift
	echo "== $*" >&2
	"$@" >"$OUT/$name.txt" 2>&1 || { cat "$OUT/$name.txt" >&2; exit 1; }
}

# metric FILE NAME-REGEX UNIT: the value before UNIT on the lines whose name matches
# NAME-REGEX (only the first benchmark name that matches): the median when a benchmark ran
# several times (-count).
metric() {
	awk -v re="$2" -v u="$3" '
		$1 ~ re && (name == "" || $1 == name) {
			for (i = 2; i <= NF; i++) if ($i == u) { name = $1; v[n++] = $(i - 1) + 0 }
		}
		END {
			if (n == 0) exit
			for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
			m = n % 2 ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2
			print (m == int(m) ? m : sprintf("%.4g", m))
		}' "$OUT/$1.txt"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
inv() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == 0) print "n/a"; else printf "%.2f", b / a }'; }

# splice FILE BEGIN-MARKER END-MARKER: put FILE between the markers in BENCHMARKS.md
# (appended when the begin marker is missing), leaving the rest of the file as it is.
splice() {
	if grep -q "$2" BENCHMARKS.md; then
		awk -v f="$1" -v b="$2" -v e="$3" '
			index($0, b) == 1 { while ((getline l < f) > 0) print l; skip = 1; next }
			index($0, e) == 1 { skip = 0; next }
			!skip' BENCHMARKS.md >"$OUT/BENCHMARKS.md.new"
		mv "$OUT/BENCHMARKS.md.new" BENCHMARKS.md
	else
		{ echo; cat "$1"; } >>BENCHMARKS.md
	fi
}
