"""The JVM ``lance`` source: a thin DataSource V2 in Java over the pure-Python engine.

PySpark's Python data sources get no column pruning, no statistics (Spark never broadcasts
them) and hand Spark rows; a DataSource V2 gets all three. The Java classes
(``java/org/lanceformat/spark``, a few hundred lines) do only what Spark asks of a V2 source:
they take the query's columns and filters, report the table's row count and size, and wrap the
Arrow batches a Python worker (:mod:`lance_format.spark.jvm.worker`) decodes as Spark column
vectors. Planning, decoding, writes, streams and the change feed stay the Python source's.

The jar is compiled from the shipped sources with the machine's ``javac`` against the jars of
the running PySpark, once per Spark version and source, into a cache directory
(``$LANCE_FORMAT_CACHE``, else ``~/.cache/lance_format``). Where there is no ``javac``
(or PySpark's jars are not found) :func:`jar_path` is None and ``format("lance")`` stays the
Python data source.

On by default (where it can be built):

* on a running session: ``lance_format.spark.register(spark)`` adds it (``ADD JAR``) -- Spark
  then finds it from the thread that registered (PySpark runs each Python thread on its own JVM
  thread; other threads keep the Python source);
* at session start (every thread, every executor): ``configure(SparkSession.builder)...getOrCreate()``
  puts the jar on ``spark.jars``; ``register`` then adds the Python source only under the name the
  JVM source delegates to (``lance_python``).

``register(spark, jvm=False)``, the session conf ``spark.lance.jvm.enabled=false`` or
``LANCE_SPARK_JVM=0`` (which also makes :func:`configure` a no-op) keep the Python data source;
so does a machine without ``javac``. Streams (``readStream``/``writeStream``), writes and the
change feed reach the Python source through the JVM one (Spark's ``PythonDataSourceV2`` over
``lance_python``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

SOURCES = Path(__file__).with_name("java")
PROVIDER = "org.lanceformat.spark.LanceDataSource"
ENABLED_CONF = "spark.lance.jvm.enabled"
PYTHON_CONF = "spark.lance.jvm.python"
PATH_CONF = "spark.lance.jvm.pythonPath"
_REGISTER = "org.apache.spark.sql.sources.DataSourceRegister"


def _java_files() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "javac")):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _spark_jars() -> Path | None:
    """The jars of the PySpark this process imports (Spark's DSv2 interfaces, Arrow Java)."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    if not jars.is_dir():
        home = os.environ.get("SPARK_HOME")
        jars = Path(home) / "jars" if home else jars
    return jars if jars.is_dir() else None


def _cache_dir() -> Path:
    root = os.environ.get("LANCE_FORMAT_CACHE") or os.path.join(Path.home(), ".cache", "lance_format")
    return Path(root) / "spark-jvm"


def jar_name() -> str:
    """The jar's file name: the Spark version and a digest of the sources (a new source or Spark
    builds a new jar)."""
    import pyspark

    digest = hashlib.sha256()
    for path in _java_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"lance-spark-{pyspark.__version__}-{digest.hexdigest()[:12]}.jar"


def build(out: Path) -> Path:
    """Compile the sources into the jar ``out`` (``javac --release 17`` against PySpark's jars)."""
    javac, jars = _javac(), _spark_jars()
    if javac is None or jars is None:
        raise RuntimeError("the JVM lance source needs javac (a JDK 17+) and PySpark's jars")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        classes = Path(scratch) / "classes"
        command = [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", str(jars / "*"),
                   *map(str, _java_files())]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"javac failed on the JVM lance source:\n{result.stderr[-4000:]}")
        staged = Path(scratch) / out.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            jar.writestr(f"META-INF/services/{_REGISTER}", PROVIDER + "\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        os.replace(staged, out)  # atomic: a concurrent build leaves one whole jar
    return out


def jar_path() -> str | None:
    """The compiled jar (built on first use), or None where it cannot be built (no ``javac``,
    no PySpark jars) or ``LANCE_SPARK_JVM=0``."""
    if os.environ.get("LANCE_SPARK_JVM", "1").strip().lower() in ("0", "false", "no"):
        return None
    if _javac() is None or _spark_jars() is None:
        return None
    out = _cache_dir() / jar_name()
    if not out.exists():
        try:
            build(out)
        except (OSError, RuntimeError) as exc:
            print(f"lance_format: the JVM lance source is not used: {exc}", file=sys.stderr)
            return None
    return str(out)


def engine_root() -> str:
    """The directory the workers import ``lance_format`` from: this process's."""
    import lance_format

    return os.path.dirname(os.path.dirname(os.path.abspath(lance_format.__file__)))


def configure(builder: Any) -> Any:
    """``builder`` with the JVM source on ``spark.jars`` (when it can be built), and the workers'
    Python and path: ``configure(SparkSession.builder.master(...)).getOrCreate()``."""
    jar = jar_path()
    if jar is None:
        return builder
    existing = builder._options.get("spark.jars") if hasattr(builder, "_options") else None
    builder = builder.config("spark.jars", f"{existing},{jar}" if existing else jar)
    return builder.config(PYTHON_CONF, sys.executable).config(PATH_CONF, engine_root())


def loaded(spark: Any) -> bool:
    """Whether ``format("lance")`` is the JVM source on this thread of ``spark``."""
    jvm = spark._jvm
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(PROVIDER, False, loader)
        return True
    except Exception:
        return False


def enable(spark: Any) -> bool:
    """Use the JVM source for ``format("lance")`` in ``spark`` (this thread, when the session was
    not started with :func:`configure`); False where it cannot be built or is turned off."""
    if not loaded(spark):
        jar = jar_path()
        if jar is None:
            return False
        spark.sql(f"ADD JAR '{jar}'")
        if not loaded(spark):
            return False
    spark.conf.set(PYTHON_CONF, sys.executable)
    spark.conf.set(PATH_CONF, engine_root())
    return True


__all__ = ["PROVIDER", "ENABLED_CONF", "build", "jar_path", "configure", "enable", "loaded", "engine_root"]
