// Command lattigo_bootstrap times Lattigo v6's full-slot CKKS bootstrapping at one of its
// default parameter sets, for `heloom bench bootstrap --vs lattigo` (issue 19), which builds
// and runs it; it also runs on its own:
//
//	go run . -params N15QP880H16384H32 -threads 1,2 -reps 1
//
// It generates keys, encrypts N/2 uniform complex values (real and imaginary parts in
// [-1, 1], seeded), drops the ciphertext to level 0, bootstraps once as a warm-up, then
// bootstraps on each thread budget (runtime.GOMAXPROCS; Lattigo's operations are mostly
// single-threaded) and measures precision the way heloom does: per slot |got - want|, worst
// bits -log2(max), mean bits -log2(mean). It prints one JSON object on stdout (on failure
// {"error": ...} and exit status 1) and `progress: ...` lines on stderr.
//
// Two departures from the sets as shipped, both listed in the JSON's notes: v6.1.1's N15 sets
// get their bootstrapping ring degree and auxiliary primes from the residual parameters (the
// defaults would be 2^16 and log QP 1012), and a level holding several scales (N15QP880's
// SlotsToCoeffs {{30, 30}}) is split into one level per scale, because v6.1.1 bootstraps such
// sets to noise; -as-shipped skips the split. Only Lattigo's public API is called.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// preset is one of Lattigo's default bootstrapping parameter sets.
type preset struct {
	scheme ckks.ParametersLiteral
	btp    bootstrapping.ParametersLiteral
}

// presets names Lattigo's default sets (the variables' own names in v6.1.1).
func presets() map[string]preset {
	return map[string]preset{
		"N16QP1767H32768H32": {bootstrapping.N16QP1767H32768H32.SchemeParams, bootstrapping.N16QP1767H32768H32.BootstrappingParams},
		"N16QP1788H32768H32": {bootstrapping.N16QP1788H32768H32.SchemeParams, bootstrapping.N16QP1788H32768H32.BootstrappingParams},
		"N16QP1793H32768H32": {bootstrapping.N16QP1793H32768H32.SchemeParams, bootstrapping.N16QP1793H32768H32.BootstrappingParams},
		"N15QP880H16384H32":  {bootstrapping.N15QP880H16384H32.SchemeParams, bootstrapping.N15QP880H16384H32.BootstrappingParams},
		"N16QP1546H192H32":   {bootstrapping.N16QP1546H192H32.SchemeParams, bootstrapping.N16QP1546H192H32.BootstrappingParams},
		"N16QP1547H192H32":   {bootstrapping.N16QP1547H192H32.SchemeParams, bootstrapping.N16QP1547H192H32.BootstrappingParams},
		"N16QP1553H192H32":   {bootstrapping.N16QP1553H192H32.SchemeParams, bootstrapping.N16QP1553H192H32.BootstrappingParams},
		"N15QP768H192H32":    {bootstrapping.N15QP768H192H32.SchemeParams, bootstrapping.N15QP768H192H32.BootstrappingParams},
	}
}

// row is one thread budget's bootstrap (field names shared with the OpenFHE script).
type row struct {
	Threads    int     `json:"threads"`
	GoMaxProcs int     `json:"gomaxprocs"`
	TotalS     float64 `json:"total_s"`
	WorstBits  float64 `json:"worst_bits"`
	MeanBits   float64 `json:"mean_bits"`
	LevelsLeft int     `json:"levels_left"`
}

// report is what the program prints.
type report struct {
	Peer            string   `json:"peer"`
	Version         string   `json:"version"`
	Runtime         string   `json:"runtime"`
	Params          string   `json:"params"`
	LogN            int      `json:"log_n"`
	LogQP           float64  `json:"log_qp"`
	ResidualLogQP   float64  `json:"residual_log_qp"`
	HammingWeight   int      `json:"hamming_weight"`
	EphemeralWeight int      `json:"ephemeral_hamming_weight"`
	Slots           int      `json:"slots"`
	ScaleBits       int      `json:"scale_bits"`
	Depth           int      `json:"depth"`
	SecurityBits    int      `json:"security_bits"`
	KeygenS         float64  `json:"keygen_s"`
	SetupS          float64  `json:"setup_s"`
	KeyBytes        int64    `json:"key_bytes"`
	Rotations       int      `json:"rotations"`
	Cores           int      `json:"cores"`
	Rows            []row    `json:"rows"`
	PeakRSSBytes    int64    `json:"peak_rss_bytes"`
	Notes           []string `json:"notes"`
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "progress: "+format+"\n", a...)
}

// fail prints the error record on stdout, the message on stderr, and exits with status 1.
func fail(params string, err error) {
	msg := err.Error()
	out, _ := json.Marshal(map[string]string{"peer": "lattigo", "params": params, "error": msg})
	fmt.Println(string(out))
	fmt.Fprintln(os.Stderr, "lattigo_bootstrap:", msg)
	os.Exit(1)
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes; 0 when unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

func lattigoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/tuneinsight/lattigo/v6" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// bootstrappingParams instantiates a set's bootstrapping parameters. v6.1.1's N15 sets leave
// the bootstrapping ring degree and auxiliary primes to defaults (2^16; 61-bit primes) that do
// not give the ring or the log QP in their names, so those two are completed from the
// residual parameters; a level holding several scales (which v6.1.1 evaluates wrongly) is
// split into one level per scale unless asShipped. The notes say what changed. The result
// must match the name's log QP.
func bootstrappingParams(name string, params ckks.Parameters, p preset, asShipped bool) (bootstrapping.Parameters, []string, error) {
	var notes []string
	lit := p.btp
	if !asShipped {
		for _, f := range []struct {
			what   string
			levels *[][]int
		}{
			{"SlotsToCoeffs", &lit.SlotsToCoeffsFactorizationDepthAndLogScales},
			{"CoeffsToSlots", &lit.CoeffsToSlotsFactorizationDepthAndLogScales},
		} {
			if split, ok := splitLevels(*f.levels); ok {
				notes = append(notes, fmt.Sprintf("%s levels %v split into %v: v6.1.1 bootstraps to noise (about 0 bits, one level short) when one level holds several scales, as in N15QP880H16384H32, N15QP768H192H32 and N16QP1793H32768H32; the same bits in one more prime (-as-shipped runs the set unchanged)", f.what, *f.levels, split))
				*f.levels = split
			}
		}
	}
	if lit.LogN == nil {
		lit.LogN = utils.Pointy(params.LogN())
		if params.LogN() != bootstrapping.DefaultLogN {
			notes = append(notes, fmt.Sprintf("bootstrapping LogN set to the residual's %d", params.LogN()))
		}
	}
	want := 0
	if m := regexp.MustCompile(`QP(\d+)`).FindStringSubmatch(name); m != nil {
		want, _ = strconv.Atoi(m[1])
	}
	bp, err := bootstrapping.NewParametersFromLiteral(params, lit)
	if err != nil {
		return bp, notes, err
	}
	if want > 0 && int(math.Round(bp.BootstrappingParameters.LogQP())) > want+1 && lit.LogP == nil {
		lit.LogP = p.scheme.LogP
		notes = append(notes, fmt.Sprintf("bootstrapping LogP set to the residual's %v (the default gave log QP %.0f, not %d)", p.scheme.LogP, bp.BootstrappingParameters.LogQP(), want))
		if bp, err = bootstrapping.NewParametersFromLiteral(params, lit); err != nil {
			return bp, notes, err
		}
	}
	if got := int(math.Round(bp.BootstrappingParameters.LogQP())); want > 0 && (got > want+1 || got < want-1) {
		return bp, notes, fmt.Errorf("log QP %d does not match the set's name (%d)", got, want)
	}
	return bp, notes, nil
}

// splitLevels gives each scale of a multi-scale level its own level; ok when it changed any.
func splitLevels(levels [][]int) (out [][]int, ok bool) {
	for _, l := range levels {
		if len(l) > 1 {
			ok = true
		}
		for _, scale := range l {
			out = append(out, []int{scale})
		}
	}
	return out, ok
}

func parseThreads(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || t < 1 {
			return nil, fmt.Errorf("-threads %q: want a comma-separated list of positive integers", s)
		}
		out = append(out, t)
	}
	return out, nil
}

func main() {
	name := flag.String("params", "N16QP1767H32768H32", "Lattigo default bootstrapping parameter set")
	threadsFlag := flag.String("threads", "1", "comma-separated thread budgets (GOMAXPROCS per run)")
	reps := flag.Int("reps", 1, "bootstraps per thread budget, the fastest reported")
	seed := flag.Uint64("seed", 1, "seed of the input values")
	asShipped := flag.Bool("as-shipped", false, "run the set's levels unchanged (v6.1.1 fails on multi-scale levels)")
	flag.Parse()

	// Lattigo panics on some misuse; turn that into the error record too.
	defer func() {
		if r := recover(); r != nil {
			fail(*name, fmt.Errorf("panic: %v", r))
		}
	}()

	p, ok := presets()[*name]
	if !ok {
		var names []string
		for k := range presets() {
			names = append(names, k)
		}
		fail(*name, fmt.Errorf("unknown -params %q; Lattigo v6.1.1's default sets: %s", *name, strings.Join(names, ", ")))
	}
	threads, err := parseThreads(*threadsFlag)
	if err != nil {
		fail(*name, err)
	}
	if *reps < 1 {
		*reps = 1
	}

	params, err := ckks.NewParametersFromLiteral(p.scheme)
	if err != nil {
		fail(*name, fmt.Errorf("residual parameters: %w", err))
	}
	btpParams, notes, err := bootstrappingParams(*name, params, p, *asShipped)
	if err != nil {
		fail(*name, fmt.Errorf("bootstrapping parameters: %w", err))
	}

	// Key generation on every core: it is set-up, not the timed bootstrap.
	runtime.GOMAXPROCS(runtime.NumCPU())
	progress("lattigo %s: generating keys", *name)
	t0 := time.Now()
	kgen := rlwe.NewKeyGenerator(params)
	sk, pk := kgen.GenKeyPairNew()
	evk, _, err := btpParams.GenEvaluationKeys(sk)
	if err != nil {
		fail(*name, fmt.Errorf("key generation: %w", err))
	}
	keygenS := time.Since(t0).Seconds()

	progress("lattigo %s: encoding the transforms", *name)
	t0 = time.Now()
	eval, err := bootstrapping.NewEvaluator(btpParams, evk)
	if err != nil {
		fail(*name, fmt.Errorf("evaluator: %w", err))
	}
	setupS := time.Since(t0).Seconds()

	enc := ckks.NewEncoder(params)
	encryptor := rlwe.NewEncryptor(params, pk)
	decryptor := rlwe.NewDecryptor(params, sk)
	slots := params.MaxSlots()
	rng := rand.New(rand.NewPCG(*seed, 0x6865_6c6f_6f6d))
	want := make([]complex128, slots)
	for i := range want {
		want[i] = complex(2*rng.Float64()-1, 2*rng.Float64()-1)
	}
	pt := ckks.NewPlaintext(params, params.MaxLevel())
	if err := enc.Encode(want, pt); err != nil {
		fail(*name, fmt.Errorf("encode: %w", err))
	}
	ct, err := encryptor.EncryptNew(pt)
	if err != nil {
		fail(*name, fmt.Errorf("encrypt: %w", err))
	}
	// Bootstrapping takes level 0, as heloom's benchmark gives it.
	ckks.NewEvaluator(params, nil).DropLevel(ct, ct.Level())

	var rows []row
	got := make([]complex128, slots)
	for i, t := range threads {
		runtime.GOMAXPROCS(t)
		if i == 0 {
			progress("lattigo %s: warm-up bootstrap", *name)
			if _, err := eval.Bootstrap(ct); err != nil {
				fail(*name, fmt.Errorf("bootstrap: %w", err))
			}
		}
		best := math.Inf(1)
		var out *rlwe.Ciphertext
		for r := 0; r < *reps; r++ {
			progress("lattigo %s: bootstrap on %d thread(s), run %d", *name, t, r+1)
			t0 := time.Now()
			o, err := eval.Bootstrap(ct)
			s := time.Since(t0).Seconds()
			if err != nil {
				fail(*name, fmt.Errorf("bootstrap: %w", err))
			}
			if s < best {
				best, out = s, o
			}
		}
		if err := enc.Decode(decryptor.DecryptNew(out), got); err != nil {
			fail(*name, fmt.Errorf("decode: %w", err))
		}
		worst, sum := 0.0, 0.0
		for j := range want {
			e := cmplx.Abs(got[j] - want[j])
			worst = math.Max(worst, e)
			sum += e
		}
		rows = append(rows, row{
			Threads:    t,
			GoMaxProcs: runtime.GOMAXPROCS(0),
			TotalS:     best,
			WorstBits:  -math.Log2(worst),
			MeanBits:   -math.Log2(sum / float64(len(want))),
			LevelsLeft: out.Level(),
		})
	}

	bp := btpParams.BootstrappingParameters
	r := report{
		Peer:            "lattigo",
		Version:         lattigoVersion(),
		Runtime:         runtime.Version(),
		Params:          *name,
		LogN:            params.LogN(),
		LogQP:           bp.LogQP(),
		ResidualLogQP:   params.LogQP(),
		HammingWeight:   params.XsHammingWeight(),
		EphemeralWeight: btpParams.EphemeralSecretWeight,
		Slots:           slots,
		ScaleBits:       params.LogDefaultScale(),
		Depth:           eval.Depth(),
		// Lattigo's default sets are chosen for 128 bits (the standard's table for log QP).
		SecurityBits: 128,
		KeygenS:      keygenS,
		SetupS:       setupS,
		KeyBytes:     int64(evk.BinarySize()),
		Rotations:    len(evk.MemEvaluationKeySet.GaloisKeys),
		Cores:        runtime.NumCPU(),
		Rows:         rows,
		PeakRSSBytes: peakRSS(),
		Notes:        notes,
	}
	out, err := json.Marshal(r)
	if err != nil {
		fail(*name, err)
	}
	fmt.Println(string(out))
}
