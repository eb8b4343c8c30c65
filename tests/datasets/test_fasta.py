"""read_fasta and read_sequence_csv on the peptide files shipped in modlamp's wheel (a test
extra: ``pip install --no-deps modlamp``), against a direct parse of the same files."""
import importlib.resources

import pytest
import torch

from torchkern.datasets import read_fasta, read_sequence_csv


def _modlamp_file(name):
    # modlamp must be installed (test extra): a missing package fails, it does not skip.
    return importlib.resources.files("modlamp").joinpath("data", name)


def test_read_sequence_csv_amp_vs_uniprot():
    path = _modlamp_file("AMPvsUniProt.csv")
    seqs, y, names = read_sequence_csv(path)
    lines = path.read_text().splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    body = [ln.split(",") for ln in lines[1:] if ln.strip()]
    assert len(seqs) == len(body) == int(header[0]) == 5200
    assert names == header[2:] == ["UniProt", "AMP"]
    assert seqs == [r[0].strip() for r in body]
    assert y.dtype == torch.long and y.tolist() == [int(r[1]) for r in body]
    assert int(y.sum()) == sum(r[1].strip() == "1" for r in body) == 2600
    assert seqs[0] == "GLWSKIKEVGKEAAKAAAKAAGKAALGAVSEAV" and y[0] == 1


def test_read_fasta_modlamp_test_file():
    path = _modlamp_file("test.fasta")
    names, seqs = read_fasta(path)
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    heads = [i for i, ln in enumerate(lines) if ln.startswith(">")]
    assert names == [lines[i][1:] for i in heads]
    ends = heads[1:] + [len(lines)]
    assert seqs == ["".join(lines[a + 1:b]) for a, b in zip(heads, ends)]
    assert len(seqs) == 51 and names[0] == "Seq_0"
    assert seqs[1] == "YVPLPNVPQPGRRPFPTFPGQGPFNPKIKWPQGY"


def test_read_fasta_multiline_and_errors(tmp_path):
    f = tmp_path / "a.fa"
    f.write_text(">s1 first\nACGT\nAC GT\n\n;comment\n>s2\n>s3\nTT\n")
    assert read_fasta(f) == (["s1 first", "s2", "s3"], ["ACGTACGT", "", "TT"])
    bad = tmp_path / "b.fa"
    bad.write_text("ACGT\n>s1\nAC\n")
    with pytest.raises(ValueError, match="line 1"):
        read_fasta(bad)
    empty = tmp_path / "c.fa"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no FASTA record"):
        read_fasta(empty)


def test_read_sequence_csv_errors(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("2,1,neg,pos\nAAK,1\nGGD,0\n")
    seqs, y, names = read_sequence_csv(f)
    assert (seqs, y.tolist(), names) == (["AAK", "GGD"], [1, 0], ["neg", "pos"])
    f.write_text("3,1,neg,pos\nAAK,1\nGGD,0\n")
    with pytest.raises(ValueError, match="announces 3"):
        read_sequence_csv(f)
    f.write_text("2,1,neg,pos\nAAK,2\nGGD,0\n")
    with pytest.raises(ValueError, match="line 2"):
        read_sequence_csv(f)
    f.write_text("seq,label\nAAK,1\n")
    with pytest.raises(ValueError, match="first line"):
        read_sequence_csv(f)


def test_non_utf8_bytes_name_file_and_line(tmp_path):
    # Latin-1 'é' (0xE9) on line 3: a ValueError naming the file, line and column, not a
    # bare UnicodeDecodeError from deep inside the reader
    f = tmp_path / "latin1.fa"
    f.write_bytes(b">s1\nACGT\n>s2 caf\xe9\nAC\n")
    with pytest.raises(ValueError, match=r"latin1\.fa: line 3, column 8: byte 0xe9 is not UTF-8"):
        read_fasta(f)
    g = tmp_path / "latin1.csv"
    g.write_bytes(b"2,1,neg,pos\nAAK,1\nGG\xff,0\n")
    with pytest.raises(ValueError, match=r"latin1\.csv: line 3, column 3: byte 0xff"):
        read_sequence_csv(g)
    # valid UTF-8 (a BOM, Windows line ends, non-ASCII names) still reads
    h = tmp_path / "utf8.fa"
    h.write_bytes("\ufeff>café\r\nAC\r\nGT\r\n".encode("utf-8"))
    assert read_fasta(h) == (["café"], ["ACGT"])


def test_sequence_csv_error_names_the_files_own_line(tmp_path):
    # blank lines are skipped; the message counted only the non-blank rows (said line 4)
    path = tmp_path / "peptides.csv"
    path.write_text("3,1,neg,pos\nACG,0\n\n\nAC,1\nGG,7\n")
    with pytest.raises(ValueError, match="line 6 must be 'sequence, label'"):
        read_sequence_csv(path)
