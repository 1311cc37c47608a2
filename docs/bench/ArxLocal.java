/*
 * ArxLocal: ARX 3.9.2's local recoding (the ARX GUI's "local transformation") on any ';'-separated
 * table with ARX hierarchy files: Adult and the ARX team's benchmark sets creditcard and mach2019
 * (arx-deidentifier/genetic-benchmark). The ARX side of kanon's granularity comparison over k; public
 * ARX API only; compiled and run by arx-local.sh (next to this file).
 *
 *   java -Xmx6g -cp arx-core.jar:<deps>:<classes> ArxLocal MODE VARIANT K WARM DATA_CSV HIER_DIR HIER_PREFIX
 *                                                        QIS SENSITIVE RESULTS_CSV RELEASE_CSV
 *
 * MODE     local (the only mode): the settings of the ARX GUI's local transformation (WorkerAnonymize,
 *          100 iterations), as in ArxModels/AdultBench "local": suppression limit 1 - 1/100,
 *          Metric.createLossMetric(0.0) (g/s-factor 0), Flash (AnonymizationAlgorithm.OPTIMAL), anonymize,
 *          getOutput(false), then result.optimizeIterativeFast(output, 1/100)
 * VARIANT  k      KAnonymity(K); SENSITIVE is an insensitive attribute (in every variant but l2)
 *          l2     KAnonymity(K) + DistinctLDiversity(SENSITIVE, 2), SENSITIVE a sensitive attribute;
 *                 otherwise the same local settings
 *          supp2  KAnonymity(K) with a 2 % suppression limit, exactly as the ARX GUI runs it when a user sets
 *                 2 % and ticks "local transformation": the limit is set (0.02) and then, as in
 *                 WorkerAnonymize, overwritten with 1 - 1/iterations for the anonymize call (the GUI restores
 *                 the user's value afterwards), and optimizeIterativeFast sets every step's limit itself
 *                 (1 - the step's share of the remaining outliers). The user's 2 % has no effect: the
 *                 release is variant k's (ARX's iterative recoding ends with 0 or a few suppressed rows,
 *                 within 2 % anyway).
 *          supp2stop  the reading that makes the 2 % matter, not a GUI setting: the same anonymize +
 *                 getOutput(false), then the loop of ARXResult.optimizeIterativeFast (ARX 3.9.2) replayed
 *                 step by step with the public result.optimizeFast(output, 1/100, NaN, listener) it calls,
 *                 plus one exit: stop as soon as at most floor(0.02 n) rows are suppressed (ARX's rounding
 *                 of a suppression limit). Every step is ARX's; only the last steps are skipped and their
 *                 rows stay suppressed. (The other GUI route, global Flash with a 2 % limit and then "local
 *                 recoding" of the suppressed rows in the analysis view, keeps one full-domain
 *                 generalization for >= 98 % of the rows: a global result, not this comparison.)
 * K        k of KAnonymity(K)
 * WARM     warm runs after the first (cold) run of this JVM. If the cold run takes longer than
 *          ARX_SLOW_MS (env, default 60000) at most 1 warm run is made.
 * DATA_CSV     the input table (';', header row); every column that is neither a QI nor SENSITIVE is an
 *              insensitive attribute and passes through unchanged
 * HIER_DIR, HIER_PREFIX  the hierarchy of QI q is HIER_DIR/HIER_PREFIX<q>.csv (';', leaf;...;root)
 * QIS      comma-separated quasi-identifiers
 * SENSITIVE    the sensitive attribute of variant l2 (insensitive in the other variants)
 * RESULTS_CSV  one line per JVM is appended (header written when the file is new)
 * RELEASE_CSV  the release of the cold run (';', suppressed rows have ARX's '*' in every QI)
 *
 * anon_ms = anonymize + getOutput(false) + the local recoding steps (System.nanoTime inside the JVM);
 * loading and saving are not included. A run longer than ARX_RUN_LIMIT_S (env, default 900) ends the
 * JVM with exit code 124 after appending a "timeout" line. One summary line (key=value) on stdout.
 */
import java.io.BufferedReader;
import java.io.File;
import java.io.FileWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXConfiguration.AnonymizationAlgorithm;
import org.deidentifier.arx.ARXListener;
import org.deidentifier.arx.ARXProcessStatistics;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.aggregates.StatisticsEquivalenceClasses;
import org.deidentifier.arx.criteria.DistinctLDiversity;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.metric.Metric;

public class ArxLocal {

    static final int ITERATIONS = 100;        // ARX GUI default for local recoding
    static final double SUPP2_LIMIT = 0.02;    // variants supp2, supp2stop

    static String variant;
    static int k;
    static File dataCsv, hierDir;
    static String hierPrefix, sensitive;
    static String[] qis;

    static Data load() throws IOException {
        String[] header;
        try (BufferedReader r = Files.newBufferedReader(dataCsv.toPath(), StandardCharsets.UTF_8)) {
            header = r.readLine().split(";", -1);
        }
        Data data = Data.create(dataCsv, StandardCharsets.UTF_8, ';');
        List<String> qiList = Arrays.asList(qis);
        for (String col : header) {
            if (qiList.contains(col)) {
                Hierarchy h = Hierarchy.create(new File(hierDir, hierPrefix + col + ".csv"), StandardCharsets.UTF_8, ';');
                data.getDefinition().setAttributeType(col, h); // QUASI_IDENTIFYING with this hierarchy
            } else if (col.equals(sensitive) && variant.equals("l2")) {
                data.getDefinition().setAttributeType(col, AttributeType.SENSITIVE_ATTRIBUTE);
            } else {
                data.getDefinition().setAttributeType(col, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }
        for (String qi : qis) {
            if (!Arrays.asList(header).contains(qi)) throw new IllegalArgumentException("no column " + qi + " in " + dataCsv);
        }
        return data;
    }

    static ARXConfiguration config() {
        ARXConfiguration c = ARXConfiguration.create();
        c.addPrivacyModel(new KAnonymity(k));
        if (variant.equals("l2")) c.addPrivacyModel(new DistinctLDiversity(sensitive, 2));
        c.setAlgorithm(AnonymizationAlgorithm.OPTIMAL);
        if (variant.equals("supp2")) c.setSuppressionLimit(SUPP2_LIMIT); // the GUI user's setting ...
        // ... which the GUI's local transformation (WorkerAnonymize) overwrites, as in every variant:
        c.setSuppressionLimit(1d - 1d / ITERATIONS);
        c.setQualityModel(Metric.createLossMetric(0d));
        return c;
    }

    static int outliers(DataHandle h) {
        int n = 0;
        for (int row = 0; row < h.getNumRows(); row++) if (h.isOutlier(row)) n++;
        return n;
    }

    static final class Run { double anonMs; DataHandle output; int steps; }

    static volatile long runStart = 0;   // System.nanoTime of the running run, 0 between runs
    static volatile String runLabel = "";

    static Run once() throws Exception {
        Data data = load();
        ARXConfiguration cfg = config();
        Run r = new Run();
        long t1 = System.nanoTime();
        runStart = t1;
        ARXResult result = new ARXAnonymizer().anonymize(data, cfg);
        DataHandle output = result.isResultAvailable() ? result.getOutput(false) : null;
        if (output == null) throw new IllegalStateException("ARX found no solution (" + variant + ", k " + k + ")");
        if (variant.equals("supp2stop")) {
            // ARXResult.optimizeIterativeFast(output, 1/100) of ARX 3.9.2, step by step, plus the 2 % exit
            int allowed = (int) Math.floor(SUPP2_LIMIT * output.getNumRows());
            ARXListener quiet = new ARXListener() { @Override public void progress(double p) { } };
            int optimizedCurrent = Integer.MAX_VALUE;
            while (result.isOptimizable(output) && optimizedCurrent > 0 && outliers(output) > allowed) {
                ARXProcessStatistics s = result.optimizeFast(output, 1d / ITERATIONS, Double.NaN, quiet);
                optimizedCurrent = 0;
                if (s.isSolutationAvailable()) {
                    optimizedCurrent = s.getStep(0).getNumberOfRecordsTransformed();
                    r.steps++;
                }
            }
        } else {
            ARXProcessStatistics s = result.optimizeIterativeFast(output, 1d / ITERATIONS);
            r.steps = s.isSolutationAvailable() ? s.getNumberOfSteps() : 0;
        }
        long t2 = System.nanoTime();
        runStart = 0;
        r.anonMs = (t2 - t1) / 1e6;
        r.output = output;
        return r;
    }

    static final String HEADER = "data,variant,k,qis,status,warm_runs,cold_ms,warm_ms,warm_ms_min,warm_ms_median,"
            + "arx_classes,arx_suppressed,arx_min_class,arx_granularity,local_steps";

    static void append(File results, String line) throws IOException {
        boolean fresh = !results.exists() || results.length() == 0;
        try (PrintWriter out = new PrintWriter(new FileWriter(results, true))) {
            if (fresh) out.println(HEADER);
            out.println(line);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 11) {
            System.err.println("usage: ArxLocal local k|l2|supp2|supp2stop K WARM DATA_CSV HIER_DIR HIER_PREFIX QIS SENSITIVE RESULTS_CSV RELEASE_CSV");
            System.exit(2);
        }
        if (!args[0].equals("local")) throw new IllegalArgumentException("MODE must be local: " + args[0]);
        variant = args[1];
        if (!Arrays.asList("k", "l2", "supp2", "supp2stop").contains(variant)) {
            throw new IllegalArgumentException("VARIANT must be k, l2, supp2 or supp2stop: " + variant);
        }
        k = Integer.parseInt(args[2]);
        int warm = Integer.parseInt(args[3]);
        dataCsv = new File(args[4]);
        hierDir = new File(args[5]);
        hierPrefix = args[6];
        qis = args[7].split(",");
        sensitive = args[8];
        final File results = new File(args[9]);
        File release = new File(args[10]);
        final String prefix = dataCsv.getName() + "," + variant + "," + k + "," + String.join(" ", qis);
        long slowMs = Long.parseLong(System.getenv().getOrDefault("ARX_SLOW_MS", "60000"));
        final long limitS = Long.parseLong(System.getenv().getOrDefault("ARX_RUN_LIMIT_S", "900"));

        // Watchdog: a run longer than the limit ends the JVM (ARX's search cannot be interrupted)
        Thread dog = new Thread(() -> {
            while (true) {
                try { Thread.sleep(1000); } catch (InterruptedException e) { return; }
                long s = runStart;
                if (s != 0 && (System.nanoTime() - s) / 1e9 > limitS) {
                    String msg = prefix + ",timeout " + runLabel + " > " + limitS + " s,,,,,,,,,,";
                    try { append(results, msg); } catch (IOException e) { /* still exit */ }
                    System.out.println("data=" + dataCsv.getName() + " variant=" + variant + " k=" + k
                                       + " status=timeout run=" + runLabel + " limit_s=" + limitS);
                    System.out.flush();
                    Runtime.getRuntime().halt(124);
                }
            }
        });
        dog.setDaemon(true);
        dog.start();

        runLabel = "cold";
        Run cold = once();
        cold.output.save(release, ';');
        if (cold.anonMs > slowMs && warm > 1) warm = 1;
        double[] w = new double[warm];
        for (int i = 0; i < warm; i++) {
            runLabel = "warm" + (i + 1);
            Run r = once();
            w[i] = r.anonMs;
            r.output.release();
        }
        double[] s = w.clone();
        Arrays.sort(s);
        double min = warm == 0 ? cold.anonMs : s[0];
        double median = warm == 0 ? cold.anonMs : (warm % 2 == 1 ? s[warm / 2] : (s[warm / 2 - 1] + s[warm / 2]) / 2);

        // ARX's own view of the cold run's release (not timed)
        StatisticsEquivalenceClasses ec = cold.output.getStatistics().getEquivalenceClassStatistics();
        double gran = 1d - cold.output.getStatistics().getQualityStatistics().getGranularity().getArithmeticMean(true);
        List<String> ws = new ArrayList<>();
        for (double x : w) ws.add(String.format("%.1f", x));
        append(results, String.format("%s,ok,%d,%.1f,%s,%.1f,%.1f,%d,%d,%d,%.4f,%d", prefix, warm, cold.anonMs,
                                      String.join(" ", ws), min, median, ec.getNumberOfEquivalenceClasses(),
                                      ec.getNumberOfSuppressedRecords(), ec.getMinimalEquivalenceClassSize(), gran, cold.steps));
        System.out.printf("data=%s variant=%s k=%d status=ok cold_ms=%.0f warm_ms=[%s] warm_ms_min=%.0f warm_ms_median=%.0f "
                          + "arx_classes=%d arx_suppressed=%d arx_min_class=%d arx_granularity=%.4f local_steps=%d%n",
                          dataCsv.getName(), variant, k, cold.anonMs, String.join(",", ws), min, median,
                          ec.getNumberOfEquivalenceClasses(), ec.getNumberOfSuppressedRecords(),
                          ec.getMinimalEquivalenceClassSize(), gran, cold.steps);
        System.exit(0);
    }
}
