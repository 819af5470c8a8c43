"""Each raw-format reader on small fixture files that carry the real files' quirks and broken rows."""

from tests.conftest import FIXTURE_RAW as R

from stsreg.product.data import readers
from stsreg.infra.errors import InputError


def test_stsb_quoting_off_7_or_9_fields_and_truncated_row():
    out = readers.read_stsb(R / "STSBenchmark/sts-train.csv", R)
    # 10 lines: one truncated row is a structural reject, the other 9 parse (content is judged later)
    assert len(out.rows) == 9
    assert out.rejects == [{"file": "STSBenchmark/sts-train.csv", "line": 4,
                            "reason": "expected 7 or 9 tab-separated fields, got 6",
                            "raw": "main-captions\tMSRvid\t2012test\t0004\t2.000\tA man is playing a flute."}]
    # unbalanced quotes survive verbatim instead of merging lines
    assert out.rows[1]["sentence1"] == 'He said "no way.'
    assert out.rows[1]["line"] == 2
    # the 9-field row keeps fields 0-6 only
    assert out.rows[2]["sentence2"] == "A dog ran." and out.rows[2]["subset"] == "deft-forum"


def test_sts15_blank_gold_is_skipped_and_counted():
    out = readers.read_sts_year(R / "STS15/STS.input.images.txt", R / "STS15/STS.gs.images.txt", "images", R)
    assert [r["line"] for r in out.rows] == [1, 3]
    assert out.skipped == 1
    assert out.rows[0]["subset"] == "images"


def test_sts16_input_has_four_fields():
    out = readers.read_sts_year(R / "STS16/STS2016.input.headlines.txt", R / "STS16/STS2016.gs.headlines.txt",
                                "headlines", R, n_fields=4)
    assert len(out.rows) == 2 and not out.rejects
    assert out.rows[0]["sentence2"] == "STS16 headlines second sentence 0."
    # read as 2-field files, the same lines are structural rejects
    bad = readers.read_sts_year(R / "STS16/STS2016.input.headlines.txt", R / "STS16/STS2016.gs.headlines.txt",
                                "headlines", R)
    assert len(bad.rejects) == 2 and "expected 2 tab-separated fields, got 4" in bad.rejects[0]["reason"]


def test_sts_input_and_gold_must_align(tmp_path):
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "gs.txt").write_text("1.0\n")
    try:
        readers.read_sts_year(tmp_path / "in.txt", tmp_path / "gs.txt", "x", tmp_path)
    except InputError as exc:
        assert "2 input lines but gs.txt has 1 gold lines" in str(exc)
    else:
        raise AssertionError("misaligned files must raise")


def test_sick_crlf_and_lf():
    assert (R / "SICK/SICK_test_annotated.txt").read_bytes().count(b"\r\n") == 3
    test = readers.read_sick(R / "SICK/SICK_test_annotated.txt", R)
    train = readers.read_sick(R / "SICK/SICK_train.txt", R)
    assert [r["score"] for r in test.rows] == ["5.0", "1.6"]  # no stray "\r"
    assert [r["line"] for r in test.rows] == [2, 3]
    assert len(train.rows) == 3 and train.rows[0]["subset"] == "SICK"


def test_senteval_snli_parallel_files():
    out = readers.read_senteval_snli(R / "NLI/SNLI_senteval_tokenized", "dev", R)
    assert [r["label"] for r in out.rows] == ["neutral", "contradiction"]
    assert out.rows[0]["premise"] == "Two women are embracing . "  # stripped later, in prepare
    assert out.rows[0]["file"] == "NLI/SNLI_senteval_tokenized/s1.dev"


def test_mnli_xnli_cad_tsv_by_column_name():
    mnli = readers.read_mnli_tsv(R / "NLI/MNLI/dev_matched.tsv", R)
    assert mnli.rows[1]["premise"] == 'He said "fine.' and mnli.rows[1]["label"] == "entailment"
    xnli = readers.read_xnli_tsv(R / "NLI/XNLI/en_test.tsv", R)
    assert xnli.rows[0]["hypothesis"] == "I went." and xnli.rows[0]["label"] == "contradiction"
    assert xnli.rejects[0]["line"] == 3 and "expected 6 tab-separated fields, got 4" in xnli.rejects[0]["reason"]
    cad = readers.read_cad_tsv(R / "NLI/SNLI_CAD/train.tsv", R)
    assert len(cad.rows) == 2


def test_anli_multiline_quoted_csv_any_column_order():
    for r in (1, 2, 3):
        out = readers.read_anli_csv(R / f"NLI/ANLI/anli_r{r}_dev_analysis.csv", R)
        assert [row["label"] for row in out.rows] == ["entailment", "contradiction"]
        assert out.rows[0]["premise"] == 'Linguistics is the study of language,\nand of its "structure".'
        # the first record spans physical lines 2-5 (3 embedded newlines), so the second starts on line 6
        assert [row["line"] for row in out.rows] == [2, 6]


def test_official_jsonl_with_a_broken_line():
    out = readers.read_nli_jsonl(R / "NLI/snli_1.0/snli_1.0_train.jsonl", R)
    assert [r["label"] for r in out.rows] == ["neutral", "-", "entailment"]
    assert len(out.rejects) == 1 and out.rejects[0]["line"] == 3
    assert out.rejects[0]["reason"].startswith("bad jsonl record: JSONDecodeError")
