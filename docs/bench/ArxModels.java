/*
 * ArxModels: ARX 3.9.2 on Adult (8 QIs, ARX hierarchies) under five privacy models and three
 * transformations, the ARX side of kanon's configs/adult-{beta-likeness,delta-disclosure,k-map,
 * average-risk,population-uniqueness,top-bottom-coding,microaggregation,cell-suppression}.toml.
 * Public ARX API only; compiled and run by arx-models.sh (next to this file).
 *
 *   java -Xmx6g -cp arx-core.jar:<deps>:<classes> ArxModels MODEL WARM DATADIR RELEASE_CSV [ALG]
 *
 * MODEL  beta-likeness          KAnonymity(10) + EnhancedBLikeness("salary-class", 1.0)
 *        delta-disclosure       KAnonymity(10) + DDisclosurePrivacy("salary-class", 1.2)  (log2 in ARX)
 *        k-map                  KMap(10, 0.01, ARXPopulationModel.create(301620L), POISSON), no KAnonymity
 *        average-risk           AverageReidentificationRisk(0.05, 0.2, 0.02), no KAnonymity
 *        population-uniqueness  PopulationUniqueness(0.001, DANKAR, ARXPopulationModel.create(301620L)),
 *                               no KAnonymity
 *        top-bottom-coding      KAnonymity(10); age's hierarchy is built here as kanon builds it for
 *                               intervals = [5, 10, 20], top_code = 80, bottom_code = 20:
 *                               age ; coded leaf (>=80, <=20, else the age) ; 5-, 10-, 20-year intervals
 *                               aligned on multiples of the width over the coded values, an interval
 *                               holding a bound open-ended (<25, >=80, ...) ; *, with
 *                               setMinimumGeneralization("age", 1) so no uncoded age is ever published
 *        microaggregation       KAnonymity(10); age DataType.DECIMAL with ARX's age hierarchy and
 *                               setMicroAggregationFunction("age", createArithmeticMean(), true): classes
 *                               are formed with the hierarchy, each publishes its mean age (DECIMAL, so
 *                               not rounded to whole years as DataType.INTEGER would)
 *        differential-privacy   EDDifferentialPrivacy(2.0, 1e-6) (data-dependent: SafePub's search),
 *                               setDPSearchBudget(0.1), setHeuristicSearchStepLimit(100), suppression limit 1,
 *                               Metric.createLossMetric(); ARX draws from SecureRandom, so each run differs
 *        delta-presence         KAnonymity(5) + DPresence(0.05, 0.5, subset): adult.csv is the population and the
 *                               subset its rows i with SHA-256("kanon-presence:" + i) < 0.3 (first two bytes
 *                               < 19660), as data/adult/presence.py marks `in_study`; DPresence supports no
 *                               local recoding, so global Flash, suppression limit 0.05 (the kanon job's);
 *                               the release saved and scored is the research subset (getView())
 *        cell-suppression       KAnonymity(10); ARX has no cell-level suppression: always global Flash with
 *                               record suppression, limit 0.02 (kanon's suppression_limit) unless
 *                               ARX_GLOBAL_SUPP is set
 * WARM   warm runs after the first (cold) run of this JVM; the median warm anonymize time is reported
 * DATADIR  directory with adult.csv and adult_hierarchy_<qi>.csv (';')
 * RELEASE_CSV  release of the cold run (';', ARX's '*' for suppressed cells)
 * ALG    local (default): the ARX GUI's local recoding (as AdultBench "local"): suppression limit
 *                1 - 1/100, Metric.createLossMetric(0.0), anonymize, getOutput(false),
 *                result.optimizeIterativeFast(output, 1/100). If a model does not support local
 *                recoding (PopulationUniqueness), it falls back to global and says so.
 *        global: Flash (AnonymizationAlgorithm.OPTIMAL), suppression limit SUPP (env ARX_GLOBAL_SUPP,
 *                default 0, the ARX GUI default), Metric.createLossMetric().
 *
 * anon_ms = anonymize + getOutput(false) (+ optimizeIterativeFast for local); loading and saving
 * are not included. One summary line (key=value) is printed on stdout.
 */
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXConfiguration.AnonymizationAlgorithm;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXProcessStatistics;
import org.deidentifier.arx.ARXResult;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.AttributeType.Hierarchy.DefaultHierarchy;
import org.deidentifier.arx.AttributeType.MicroAggregationFunction;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.DataSubset;
import org.deidentifier.arx.DataType;
import org.deidentifier.arx.aggregates.StatisticsEquivalenceClasses;
import org.deidentifier.arx.criteria.AverageReidentificationRisk;
import org.deidentifier.arx.criteria.DDisclosurePrivacy;
import org.deidentifier.arx.criteria.DPresence;
import org.deidentifier.arx.criteria.EnhancedBLikeness;
import org.deidentifier.arx.criteria.KAnonymity;
import org.deidentifier.arx.criteria.EDDifferentialPrivacy;
import org.deidentifier.arx.criteria.KMap;
import org.deidentifier.arx.criteria.PopulationUniqueness;
import org.deidentifier.arx.criteria.PrivacyCriterion;
import org.deidentifier.arx.metric.Metric;
import org.deidentifier.arx.risk.RiskEstimateBuilder;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;

public class ArxModels {

    static final String[] QIS = { "age", "sex", "race", "marital-status", "education",
                                  "native-country", "workclass", "occupation" };
    static final String SENSITIVE = "salary-class";
    static final int ITERATIONS = 100;          // ARX GUI default for local recoding
    static final long POPULATION = 301620L;     // Adult's 30,162 rows as a 10 % sample

    static final int TOP_CODE = 80, BOTTOM_CODE = 20;   // configs/adult-top-bottom-coding.toml
    static final int[] WIDTHS = { 5, 10, 20 };           // its age intervals

    static Data load(File dir, String model) throws IOException {
        boolean sensitive = needsSensitive(model);
        Data data = Data.create(new File(dir, "adult.csv"), StandardCharsets.UTF_8, ';');
        for (String qi : QIS) {
            Hierarchy h = qi.equals("age") && model.equals("top-bottom-coding") ? codedAge(dir)
                    : Hierarchy.create(new File(dir, "adult_hierarchy_" + qi + ".csv"), StandardCharsets.UTF_8, ';');
            data.getDefinition().setAttributeType(qi, h);
        }
        if (model.equals("top-bottom-coding")) data.getDefinition().setMinimumGeneralization("age", 1);
        if (model.equals("microaggregation")) {
            data.getDefinition().setDataType("age", DataType.DECIMAL);
            data.getDefinition().setMicroAggregationFunction("age", MicroAggregationFunction.createArithmeticMean(), true);
        }
        data.getDefinition().setAttributeType(SENSITIVE,
                sensitive ? AttributeType.SENSITIVE_ATTRIBUTE : AttributeType.INSENSITIVE_ATTRIBUTE);
        return data;
    }

    /** The distinct ages of adult.csv. */
    static TreeSet<Integer> ages(File dir) throws IOException {
        List<String> lines = Files.readAllLines(new File(dir, "adult.csv").toPath(), StandardCharsets.UTF_8);
        int col = Arrays.asList(lines.get(0).split(";", -1)).indexOf("age");
        TreeSet<Integer> out = new TreeSet<>();
        for (String l : lines.subList(1, lines.size())) if (!l.isEmpty()) out.add(Integer.parseInt(l.split(";", -1)[col].trim()));
        return out;
    }

    /**
     * Age top- and bottom-coded as kanon codes it (crates/engine/src/hierarchy/intervals.rs, build_coded):
     * coded values v = min(max(age, 20), 80); per width w the cuts start at floor(min v / w) * w and run past
     * max v; the interval holding a bound reads "<upper cut" (bottom) or ">=lower cut" (top), "*" for both.
     */
    static Hierarchy codedAge(File dir) throws IOException {
        TreeSet<Integer> ages = ages(dir);
        TreeSet<Integer> coded = new TreeSet<>();
        for (int a : ages) coded.add(Math.min(Math.max(a, BOTTOM_CODE), TOP_CODE));
        int min = coded.first(), max = coded.last();
        List<int[]> cuts = new ArrayList<>();
        for (int w : WIDTHS) {
            List<Integer> c = new ArrayList<>();
            int x = Math.floorDiv(min, w) * w;
            while (x <= max) { c.add(x); x += w; }
            c.add(x);
            cuts.add(c.stream().mapToInt(Integer::intValue).toArray());
        }
        DefaultHierarchy h = Hierarchy.create();
        for (int a : ages) {
            int v = Math.min(Math.max(a, BOTTOM_CODE), TOP_CODE);
            String[] row = new String[3 + WIDTHS.length];
            row[0] = String.valueOf(a);
            row[1] = a >= TOP_CODE ? ">=" + TOP_CODE : a <= BOTTOM_CODE ? "<=" + BOTTOM_CODE : String.valueOf(a);
            for (int l = 0; l < WIDTHS.length; l++) row[2 + l] = codedLabel(cuts.get(l), v);
            row[row.length - 1] = "*";
            h.add(row);
        }
        return h;
    }

    /** Number of cuts <= v (Rust's partition_point(|c| c <= v)). */
    static int point(int[] cuts, int v) { int i = 0; while (i < cuts.length && cuts[i] <= v) i++; return i; }

    static String codedLabel(int[] cuts, int v) {
        int i = point(cuts, v);
        boolean bottom = point(cuts, BOTTOM_CODE) == i, top = point(cuts, TOP_CODE) == i;
        if (bottom && top) return "*";
        if (bottom) return i < cuts.length ? "<" + cuts[i] : "*";
        if (top) return i > 0 ? ">=" + cuts[i - 1] : "*";
        if (i == 0) return "<" + cuts[0];
        if (i == cuts.length) return ">=" + cuts[i - 1];
        return "[" + cuts[i - 1] + "-" + (cuts[i] - 1) + "]";
    }

    static boolean needsSensitive(String model) {
        return model.equals("beta-likeness") || model.equals("delta-disclosure");
    }

    static PrivacyCriterion[] models(String model) {
        switch (model) {
        case "beta-likeness":
            return new PrivacyCriterion[] { new KAnonymity(10), new EnhancedBLikeness(SENSITIVE, 1.0) };
        case "delta-disclosure":
            return new PrivacyCriterion[] { new KAnonymity(10), new DDisclosurePrivacy(SENSITIVE, 1.2) };
        case "k-map":
            return new PrivacyCriterion[] { new KMap(10, 0.01, ARXPopulationModel.create(POPULATION),
                                                     KMap.CellSizeEstimator.POISSON) };
        case "average-risk":
            return new PrivacyCriterion[] { new AverageReidentificationRisk(0.05, 0.2, 0.02) };
        case "population-uniqueness":
            return new PrivacyCriterion[] { new PopulationUniqueness(0.001, PopulationUniquenessModel.DANKAR,
                                                                     ARXPopulationModel.create(POPULATION)) };
        case "differential-privacy":
            return new PrivacyCriterion[] { new EDDifferentialPrivacy(2.0, 1e-6) };
        case "delta-presence":
            return new PrivacyCriterion[] { new KAnonymity(5) };
        case "top-bottom-coding":
        case "microaggregation":
        case "cell-suppression":
            return new PrivacyCriterion[] { new KAnonymity(10) };
        default:
            throw new IllegalArgumentException("unknown model: " + model);
        }
    }

    static ARXConfiguration config(String model, String alg, double globalSupp) {
        ARXConfiguration c = ARXConfiguration.create();
        for (PrivacyCriterion p : models(model)) c.addPrivacyModel(p);
        c.setAlgorithm(AnonymizationAlgorithm.OPTIMAL);
        if (model.equals("differential-privacy")) {
            c.setSuppressionLimit(1d);
            c.setDPSearchBudget(0.1);
            c.setHeuristicSearchStepLimit(100);
            c.setQualityModel(Metric.createLossMetric());
        } else if (alg.equals("global")) {
            c.setSuppressionLimit(globalSupp);
            c.setQualityModel(Metric.createLossMetric());
        } else {
            c.setSuppressionLimit(1d - 1d / ITERATIONS);
            c.setQualityModel(Metric.createLossMetric(0d));
        }
        return c;
    }

    /** The research subset of data/adult/presence.py: row i when SHA-256("kanon-presence:" + i) < 0.3. */
    static DataSubset studySubset(Data data) throws Exception {
        int n = data.getHandle().getNumRows();
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        Set<Integer> rows = new HashSet<>();
        for (int i = 0; i < n; i++) {
            byte[] d = sha.digest(("kanon-presence:" + i).getBytes(StandardCharsets.UTF_8));
            if ((((d[0] & 0xff) << 8) | (d[1] & 0xff)) < (int) (0.3 * 65536)) rows.add(i);
        }
        return DataSubset.create(data, rows);
    }

    static boolean localSupported(String model) {
        if (model.equals("delta-presence")) return false;
        for (PrivacyCriterion p : models(model)) if (!p.isLocalRecodingSupported()) return false;
        return true;
    }

    static final class Run { double anonMs; DataHandle output; ARXResult result; String transformation = ""; int localSteps = -1; }

    static Run once(String model, String alg, double supp, File dir) throws Exception {
        Data data = load(dir, model);
        ARXConfiguration cfg = config(model, alg, supp);
        if (model.equals("delta-presence")) cfg.addPrivacyModel(new DPresence(0.05, 0.5, studySubset(data)));
        Run r = new Run();
        long t1 = System.nanoTime();
        ARXResult result = new ARXAnonymizer().anonymize(data, cfg);
        DataHandle output = result.isResultAvailable() ? result.getOutput(false) : null;
        ARXProcessStatistics local = null;
        if (output != null && alg.equals("local")) local = result.optimizeIterativeFast(output, 1d / ITERATIONS);
        long t2 = System.nanoTime();
        if (local != null) r.localSteps = local.getNumberOfSteps();
        if (output == null) throw new IllegalStateException("ARX found no solution for " + model + " (" + alg + ")");
        // With a research subset, the release is the subset's rows.
        if (model.equals("delta-presence")) output = output.getView();
        r.anonMs = (t2 - t1) / 1e6; r.output = output; r.result = result;
        if (result.getGlobalOptimum() != null) {
            int[] lv = new int[QIS.length];
            for (int i = 0; i < QIS.length; i++) {
                try { lv[i] = result.getGlobalOptimum().getGeneralization(QIS[i]); } catch (RuntimeException e) { lv[i] = -1; }
            }
            r.transformation = Arrays.toString(lv).replace(",", "").replace(" ", "");
        }
        return r;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: ArxModels MODEL WARM DATADIR RELEASE_CSV [local|global]");
            System.exit(2);
        }
        String model = args[0];
        int warm = Integer.parseInt(args[1]);
        File dir = new File(args[2]);
        File release = new File(args[3]);
        String alg = args.length > 4 ? args[4] : "local";
        double supp = Double.parseDouble(System.getenv().getOrDefault("ARX_GLOBAL_SUPP",
                model.equals("cell-suppression") ? "0.02" : model.equals("differential-privacy") ? "1"
                : model.equals("delta-presence") ? "0.05" : "0"));
        String note = "";
        if (model.equals("cell-suppression") && !alg.equals("global")) {
            alg = "global";
            note = "ARX has no cell suppression: global Flash with record suppression";
            System.err.println(model + ": " + note + ", suppression limit " + supp);
        }
        if (alg.equals("local") && !localSupported(model)) {
            alg = "global";
            note = "local recoding not supported by this model in ARX (isLocalRecodingSupported()=false): fell back to global Flash";
            System.err.println(model + ": " + note + ", suppression limit " + supp);
        }

        Run cold = once(model, alg, supp, dir);
        cold.output.save(release, ';');
        double[] w = new double[warm];
        for (int i = 0; i < warm; i++) {
            Run r = once(model, alg, supp, dir);
            w[i] = r.anonMs;
            r.output.release();
        }
        double[] s = w.clone(); Arrays.sort(s);
        double median = warm == 0 ? cold.anonMs : (warm % 2 == 1 ? s[warm / 2] : (s[warm / 2 - 1] + s[warm / 2]) / 2);

        // ARX's own view of the cold run's release (not timed)
        StatisticsEquivalenceClasses ec = cold.output.getStatistics().getEquivalenceClassStatistics();
        double gran = 1d - cold.output.getStatistics().getQualityStatistics().getGranularity().getArithmeticMean(true);
        String derivedK = "";
        KMap km = cold.result.getConfiguration().getPrivacyModel(KMap.class);
        if (km != null) derivedK = String.valueOf(km.getDerivedK());
        EDDifferentialPrivacy dp = cold.result.getConfiguration().getPrivacyModel(EDDifferentialPrivacy.class);
        if (dp != null) derivedK = dp.getK() + " beta=" + dp.getBeta();
        RiskEstimateBuilder risk = cold.output.getRiskEstimator(ARXPopulationModel.create(POPULATION));
        double avgRisk = risk.getSampleBasedReidentificationRisk().getEstimatedProsecutorRisk();
        double uniq = risk.getSampleBasedUniquenessRisk().getFractionOfUniqueRecords();
        double popUniqDankar = risk.getPopulationBasedUniquenessRisk().getFractionOfUniqueTuplesDankar();

        System.out.printf("model=%s alg=%s supp_limit=%s cold_anon_ms=%.0f warm_anon_ms=%s median_warm_anon_ms=%.0f " +
                          "transformation=%s classes=%d suppressed=%d min_class=%d arx_granularity=%.4f derived_k=%s " +
                          "arx_prosecutor_risk=%.5f arx_sample_unique_frac=%.5f arx_pop_unique_dankar=%.6f local_steps=%d%s%n",
                          model, alg, alg.equals("global") ? String.valueOf(supp) : String.valueOf(1d - 1d / ITERATIONS),
                          cold.anonMs, Arrays.toString(Arrays.stream(w).mapToLong(Math::round).toArray()).replace(" ", ""),
                          median, cold.transformation, ec.getNumberOfEquivalenceClasses(), ec.getNumberOfSuppressedRecords(),
                          ec.getMinimalEquivalenceClassSize(), gran, derivedK, avgRisk, uniq, popUniqDankar, cold.localSteps,
                          note.isEmpty() ? "" : " note=\"" + note + "\"");
    }
}
