"""`attncli translate --engine ctranslate2`: an export of `attncli export RUN DIR --format
ctranslate2` translated by CTranslate2 with the run's tokenizer files, TensorFlow never
imported (`attncli.export.ctranslate2_engine`).
"""

import sys

from attncli.cli.engines import exported, require_ctranslate2
from attncli.cli.options import discard_stdout
from attncli.cli.runs import asked_decoding
from attncli.cli.translate_streams import BUFFERED_BATCHES, INTERRUPTED, format_line, open_input
from attncli.export.ctranslate2_engine import ExportedTranslator, read_settings


def translate_exported(run_path, texts, input_file, beam, alpha, n_best, output_format,
                       batch_size, console, compute_type):
    """`attncli translate --engine ctranslate2`: as `translate`, on an export, without
    TensorFlow; returns the process exit code."""
    exported(run_path, "translate")
    source = open_input(texts, input_file)
    require_ctranslate2()
    translator = ExportedTranslator(
        run_path, compute_type or "float32",
        search=asked_decoding(read_settings(run_path)["decoding"], beam=beam, alpha=alpha,
                              n_best=n_best).search,
        attention_weights=output_format == "json",
    )
    if source.interactive:
        console.print("reading sentences from the terminal, one per line; Ctrl-D ends",
                      highlight=False)
    written = 0
    try:
        for lines in source.batches(batch_size * BUFFERED_BATCHES):
            filled = [index for index, line in enumerate(lines) if line.strip()]
            results = [None] * len(lines)  # a blank line is not translated
            found = translator.translate([lines[index] for index in filled], batch_size)
            for index, result in zip(filled, found):
                results[index] = result
            sys.stdout.write("".join(format_line(written + row, result, output_format) + "\n"
                                     for row, result in enumerate(results, start=1)))
            sys.stdout.flush()
            written += len(lines)
    except BrokenPipeError:
        discard_stdout()
        return 0
    except KeyboardInterrupt:
        console.print(f"interrupted: {written} line(s) translated and written", highlight=False)
        return INTERRUPTED
    return 0
