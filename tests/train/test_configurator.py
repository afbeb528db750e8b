"""configurator.configure: config files, --key=value overrides and their errors."""

import ast
import os
import random

import pytest

from configurator import ConfigError, configure

DEFAULTS = {
    "out_dir": "out",
    "batch_size": 12,
    "block_size": 1024,
    "learning_rate": 6e-4,
    "dropout": 0.0,
    "compile": True,
    "decay_lr": True,
    "wandb_run_name": "gpt2",
    "dataset": "openwebtext",
    "device": "cuda",
    "init_from": "scratch",
    "max_iters": 600000,
    "anything": None,
}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_defaults_untouched_and_new_dict():
    defaults = dict(DEFAULTS)
    config = configure(defaults, [], verbose=False)
    assert config == DEFAULTS and config is not defaults
    config = configure(defaults, ["--batch_size=3"], verbose=False)
    assert defaults == DEFAULTS and config["batch_size"] == 3


def test_int_float_bool_str_overrides():
    n = random.randint(1, 10**6)
    config = configure(DEFAULTS, [f"--batch_size={n}", "--learning_rate=3e-5", "--compile=False",
                                  "--device=cpu", "--dropout=0.1"], verbose=False)
    assert config["batch_size"] == n and type(config["batch_size"]) is int
    assert config["learning_rate"] == 3e-5
    assert config["compile"] is False
    assert config["device"] == "cpu"
    assert config["dropout"] == 0.1


def test_int_accepted_for_float_and_converted():
    config = configure(DEFAULTS, ["--learning_rate=1", "--dropout=0"], verbose=False)
    assert config["learning_rate"] == 1.0 and type(config["learning_rate"]) is float
    assert type(config["dropout"]) is float


@pytest.mark.parametrize("text,value", [("True", True), ("False", False),
                                        ("true", True), ("false", False)])
def test_bool_spellings(text, value):
    assert configure(DEFAULTS, [f"--compile={text}"], verbose=False)["compile"] is value


@pytest.mark.parametrize("text", ["1", "0", "yes", "no", "'True'", "None", "1.0"])
def test_bool_rejects_other_values(text):
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [f"--compile={text}"], verbose=False)
    msg = str(e.value)
    assert "compile" in msg and text in msg and "bool" in msg


@pytest.mark.parametrize("key,text,expected", [
    ("batch_size", "1.5", "int"), ("batch_size", "abc", "int"), ("batch_size", "True", "int"),
    ("learning_rate", "fast", "float"), ("learning_rate", "True", "float"),
    ("max_iters", "[1, 2]", "int"),
])
def test_wrong_type_names_key_value_and_type(key, text, expected):
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [f"--{key}={text}"], verbose=False)
    msg = str(e.value)
    assert key in msg and text in msg and expected in msg


def test_str_key_keeps_raw_text():
    config = configure(DEFAULTS, ["--wandb_run_name=123", "--out_dir=1e3", "--dataset=None"],
                       verbose=False)
    assert config["wandb_run_name"] == "123"
    assert config["out_dir"] == "1e3"
    assert config["dataset"] == "None"
    # a quoted Python string literal still parses to the string
    assert configure(DEFAULTS, ["--out_dir='my out'"], verbose=False)["out_dir"] == "my out"


def test_none_default_accepts_anything():
    assert configure(DEFAULTS, ["--anything=3"], verbose=False)["anything"] == 3
    assert configure(DEFAULTS, ["--anything=(1, 'a')"], verbose=False)["anything"] == (1, "a")
    assert configure(DEFAULTS, ["--anything=hello"], verbose=False)["anything"] == "hello"


def test_value_may_contain_equals():
    config = configure(DEFAULTS, ["--wandb_run_name=lr=3e-4,bs=8", "--out_dir=a=b=c"], verbose=False)
    assert config["wandb_run_name"] == "lr=3e-4,bs=8"
    assert config["out_dir"] == "a=b=c"


def test_empty_value_for_str():
    assert configure(DEFAULTS, ["--out_dir="], verbose=False)["out_dir"] == ""


def test_unknown_key_names_closest_keys():
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, ["--lerning_rate=1e-3"], verbose=False)
    assert "lerning_rate" in str(e.value) and "learning_rate" in str(e.value)
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, ["--batchsize=1"], verbose=False)
    assert "batch_size" in str(e.value)


def test_unknown_key_with_nothing_close_lists_valid_keys():
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, ["--zzzzqqq=1"], verbose=False)
    msg = str(e.value)
    assert "zzzzqqq" in msg and "batch_size" in msg and "learning_rate" in msg


@pytest.mark.parametrize("arg", ["--batch_size", "--compile"])
def test_override_without_value(arg):
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [arg], verbose=False)
    assert arg in str(e.value)


@pytest.mark.parametrize("arg", ["-h", "--help"])
def test_help_lists_keys(arg):
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [arg], verbose=False)
    assert "usage" in str(e.value) and all(f"--{k}=" in str(e.value) for k in DEFAULTS)


def test_override_without_key():
    with pytest.raises(ConfigError):
        configure(DEFAULTS, ["--=3"], verbose=False)


def test_config_file_then_overrides_in_order(tmp_path):
    a = write(tmp_path, "a.py", "batch_size = 7\nlearning_rate = 2\nout_dir = 'from-a'\n")
    b = write(tmp_path, "b.py", "batch_size = 9\n")
    config = configure(DEFAULTS, [a, "--batch_size=1", b, "--out_dir=cli"], verbose=False)
    assert config["batch_size"] == 9  # b.py came after the override
    assert config["learning_rate"] == 2.0 and type(config["learning_rate"]) is float
    assert config["out_dir"] == "cli"
    config = configure(DEFAULTS, [a, b, "--batch_size=1"], verbose=False)
    assert config["batch_size"] == 1


def test_config_file_may_compute_and_import(tmp_path):
    path = write(tmp_path, "c.py", "import time\n_scale = 8\nbatch_size = 5 * _scale\n"
                                   "wandb_run_name = 'run-' + str(int(time.time()) > 0)\n")
    config = configure(DEFAULTS, [path], verbose=False)
    assert config["batch_size"] == 40 and config["wandb_run_name"] == "run-True"


def test_config_file_runs_in_fresh_namespace(tmp_path):
    # the file cannot see (or clobber) the caller's globals
    path = write(tmp_path, "d.py", "batch_size = len(DEFAULTS)\n")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path], verbose=False)
    assert path in str(e.value) and "NameError" in str(e.value)


def test_config_file_unknown_key(tmp_path):
    path = write(tmp_path, "e.py", "batch_size = 4\nn_layers = 2\n")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path], verbose=False)
    assert "n_layers" in str(e.value) and path in str(e.value)


def test_config_file_wrong_type(tmp_path):
    path = write(tmp_path, "f.py", "compile = 1\n")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path], verbose=False)
    assert "compile" in str(e.value) and "bool" in str(e.value)


def test_missing_config_file(tmp_path):
    path = str(tmp_path / "nope.py")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path], verbose=False)
    assert path in str(e.value)
    # a forgotten -- is pointed out
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, ["batch_size=3"], verbose=False)
    assert "--batch_size=3" in str(e.value)


def test_unreadable_config_file(tmp_path):
    # a directory cannot be read as a file
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [str(tmp_path)], verbose=False)
    assert str(tmp_path) in str(e.value)
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"out_dir = '\xff\xfe'\n")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [str(bad)], verbose=False)
    assert str(bad) in str(e.value)


def test_config_file_syntax_error(tmp_path):
    path = write(tmp_path, "g.py", "batch_size = = 3\n")
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path], verbose=False)
    assert path in str(e.value)


def test_verbose_prints_overrides(tmp_path, capsys):
    path = write(tmp_path, "h.py", "batch_size = 2\n")
    configure(DEFAULTS, [path, "--max_iters=7"], verbose=True)
    out = capsys.readouterr().out
    assert f"Overriding config with {path}:" in out and "batch_size = 2" in out
    assert "Overriding: max_iters = 7" in out
    configure(DEFAULTS, [path, "--max_iters=7"], verbose=False)
    assert capsys.readouterr().out == ""


def test_repo_config_files_are_valid(repo_root):
    """Every config/*.py sets only keys from the documented key set, with sane types."""
    keys = dict(out_dir="out", eval_interval=2000, log_interval=1, eval_iters=200, eval_only=False,
                always_save_checkpoint=True, init_from="scratch", wandb_log=False,
                wandb_project="owt", wandb_run_name="gpt2", dataset="openwebtext",
                gradient_accumulation_steps=40, batch_size=12, block_size=1024, n_layer=12,
                n_head=12, n_embd=768, dropout=0.0, bias=False, learning_rate=6e-4,
                max_iters=600000, weight_decay=1e-1, beta1=0.9, beta2=0.95, grad_clip=1.0,
                decay_lr=True, warmup_iters=2000, lr_decay_iters=600000, min_lr=6e-5,
                backend="nccl", device="cuda", dtype="bfloat16", compile=True, compile_mode="default",
                kernels="auto", seed=1337)
    config_dir = os.path.join(repo_root, "config")
    names = sorted(n for n in os.listdir(config_dir) if n.endswith(".py"))
    assert len(names) >= 8
    for name in names:
        config = configure(keys, [os.path.join(config_dir, name)], verbose=False)
        assert config["n_embd"] % config["n_head"] == 0, name
    gpt2 = configure(keys, [os.path.join(config_dir, "train_gpt2.py")], verbose=False)
    assert gpt2["batch_size"] * gpt2["block_size"] * gpt2["gradient_accumulation_steps"] == 491520
    char = configure(keys, [os.path.join(config_dir, "train_shakespeare_char.py")], verbose=False)
    assert (char["n_layer"], char["n_head"], char["n_embd"], char["block_size"],
            char["batch_size"], char["dropout"], char["max_iters"]) == (6, 6, 384, 256, 64, 0.2, 5000)
    assert char["compile_mode"] == "reduce-overhead"  # launch-bound: CUDA graphs (train.py: GPUs only)


def test_repo_config_files_use_train_py_keys(repo_root):
    """Config files may only set keys that train.py actually defines at top level."""
    train_py = os.path.join(repo_root, "train.py")
    if not os.path.isfile(train_py):
        pytest.skip("train.py is absent")
    tree = ast.parse(open(train_py, encoding="utf-8").read())
    train_keys = {t.id for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)}
    config_dir = os.path.join(repo_root, "config")
    for name in sorted(os.listdir(config_dir)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(config_dir, name)
        assigned = {t.id for node in ast.parse(open(path).read()).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
        assert assigned <= train_keys, (name, sorted(assigned - train_keys))


def test_configure_globals_updates_the_scripts_settings_in_place(capsys):
    from configurator import configure_globals
    g = {"batch_size": 12, "dropout": 0.0, "ROOT": "/repo", "_private": 1, "np": object()}
    config = configure_globals(g, ["--batch_size=32", "--dropout=1"])
    assert config == {"batch_size": 32, "dropout": 1.0}  # ROOT, _private and non-settings are not keys
    assert g["batch_size"] == 32 and g["dropout"] == 1.0 and g["ROOT"] == "/repo"
    with pytest.raises(SystemExit) as e:
        configure_globals(g, ["--batch_sise=8"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("config error:") and "batch_size" in err
    with pytest.raises(SystemExit):
        configure_globals(g, ["--ROOT=/elsewhere"])  # not a setting


def test_given_collects_the_keys_that_files_and_overrides_set(tmp_path):
    from configurator import configure
    (tmp_path / "c.py").write_text("batch_size = 12\nn_layer = 4\n")
    defaults = {"batch_size": 12, "n_layer": 12, "dropout": 0.0, "compile": True}
    given = set()
    config = configure(defaults, [str(tmp_path / "c.py"), "--compile=False"], verbose=False, given=given)
    assert given == {"batch_size", "n_layer", "compile"}  # batch_size too: set, to its default
    assert config == {"batch_size": 12, "n_layer": 4, "dropout": 0.0, "compile": False}
