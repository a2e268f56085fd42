"""The command each sandbox of `sandlet-bench cold-start` runs (issue 17): what an agent's test run does.

It imports many modules of the image's package tree (as a project's test suite and its conftest would),
then runs a small test file's worth of work on them, and prints one line, `checksum=<hex> tests=<n>`.
The checksum depends only on the results (rounded), so every sandbox of every arm prints the same line.
Single-threaded on purpose (the bench sets OMP_NUM_THREADS=1 and friends): 32 of them share the cores.
Warm and alone it takes a few seconds (4-7 s measured on the project's 2-core machines; imports are
most of it). The image also
holds packages it does not import (sympy, statsmodels, astropy, bokeh, plotly...): most of an image is
never read, which is what lazy loading is for.
"""
import hashlib
import importlib
import sys

# Imported as a test session would: the packages, and submodules a real suite touches.
MODULES = [
    "json", "csv", "sqlite3", "decimal", "fractions", "statistics", "unittest", "xml.etree.ElementTree",
    "email.parser", "http.client", "asyncio", "concurrent.futures", "logging.handlers", "argparse",
    "numpy", "numpy.linalg", "numpy.fft", "numpy.random",
    "scipy", "scipy.linalg", "scipy.sparse", "scipy.sparse.linalg", "scipy.optimize", "scipy.stats",
    "scipy.signal", "scipy.integrate", "scipy.interpolate", "scipy.spatial",
    "pandas", "pyarrow", "pyarrow.parquet", "polars", "duckdb",
    "sklearn", "sklearn.linear_model", "sklearn.ensemble", "sklearn.cluster", "sklearn.model_selection",
    "sklearn.preprocessing", "sklearn.metrics", "sklearn.decomposition",
    "networkx", "PIL.Image", "PIL.ImageFilter", "matplotlib", "matplotlib.pyplot",
    "skimage.filters", "skimage.measure", "boto3", "botocore.session", "cv2", "pytest",
]


def test_linalg(np, scipy):
    rng = np.random.default_rng(17)
    a = rng.standard_normal((120, 120))
    a = a @ a.T + 120 * np.eye(120)
    x = scipy.linalg.solve(a, np.ones(120), assume_a="pos")
    return float(np.round(x.sum(), 6))


def test_sparse_and_optimize(np, scipy):
    lap = scipy.sparse.diags([-1, 2, -1], [-1, 0, 1], shape=(400, 400), format="csr")
    sol = scipy.sparse.linalg.spsolve(lap, np.ones(400))
    res = scipy.optimize.minimize(lambda v: ((v - 3.0) ** 2).sum(), np.zeros(4), method="BFGS")
    return round(float(sol.max()), 3) + round(float(res.x.sum()), 3)


def test_frames(np, pandas, polars, duckdb, pyarrow):
    rng = np.random.default_rng(3)
    df = pandas.DataFrame({"k": rng.integers(0, 20, 5000), "v": rng.standard_normal(5000)})
    g = df.groupby("k")["v"].agg(["mean", "count"])
    pl = polars.from_pandas(df).group_by("k").agg(polars.col("v").sum()).sort("k")
    dk = duckdb.query("select k, count(*) c from df group by k order by k").df()
    tbl = pyarrow.Table.from_pandas(df)
    return round(float(g["mean"].sum()), 4) + round(float(pl["v"].sum()), 4) + int(dk["c"].sum()) + tbl.num_rows


def test_models(np, sklearn):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    x, y = make_classification(n_samples=600, n_features=12, random_state=0)
    xa, xb, ya, yb = train_test_split(x, y, random_state=0)
    lr = LogisticRegression(max_iter=300).fit(xa, ya).score(xb, yb)
    rf = RandomForestClassifier(n_estimators=15, random_state=0, n_jobs=1).fit(xa, ya).score(xb, yb)
    return round(lr, 4) + round(rf, 4)


def test_graphs(networkx):
    g = networkx.karate_club_graph()
    pr = networkx.pagerank(g)
    return round(max(pr.values()), 5) + networkx.diameter(g)


def test_images_and_plots(np, matplotlib):
    from PIL import Image, ImageFilter
    import cv2
    import skimage.filters
    img = Image.fromarray((np.arange(64 * 64).reshape(64, 64) % 251).astype("uint8"))
    blurred = np.asarray(img.filter(ImageFilter.GaussianBlur(2)), dtype=float)
    edges = cv2.Canny(np.asarray(img), 50, 150)
    otsu = skimage.filters.threshold_otsu(blurred)
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot(np.linspace(0, 1, 50) ** 2)
    fig.canvas.draw()
    plt.close(fig)
    return round(float(blurred.mean()), 3) + int(edges.sum() // 255) + round(float(otsu), 3)


def main():
    loaded = {}
    for name in MODULES:
        loaded[name] = importlib.import_module(name)
    np, scipy = loaded["numpy"], loaded["scipy"]
    results = [
        test_linalg(np, scipy),
        test_sparse_and_optimize(np, scipy),
        test_frames(np, loaded["pandas"], loaded["polars"], loaded["duckdb"], loaded["pyarrow"]),
        test_models(np, loaded["sklearn"]),
        test_graphs(loaded["networkx"]),
        test_images_and_plots(np, loaded["matplotlib"]),
    ]
    digest = hashlib.sha256(repr([round(r, 2) for r in results]).encode()).hexdigest()[:16]
    print(f"checksum={digest} tests={len(results)} modules={len(sys.modules)}")


if __name__ == "__main__":
    main()
