"""CSV read within bounds: rows, columns per row and characters per field."""

import csv
import io
from collections.abc import Iterator

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import CSV_MAX_COLUMNS, CSV_MAX_FIELD_CHARS


def csv_rows(text: str, source: str, max_rows: int) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, fields) of each row; InputError past a bound or on a malformed row.

    The csv module's own field limit is process-wide state; the bounds here are checked per row instead.
    """
    reader = csv.reader(io.StringIO(text), strict=True)
    count = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise InputError(source, f"line {reader.line_num}: is not valid CSV: {err}") from None
        count += 1
        if count > max_rows:
            raise InputError(source, f"has more than {max_rows:,} rows")
        if len(row) > CSV_MAX_COLUMNS:
            raise InputError(source, f"line {reader.line_num}: has {len(row)} fields, more than {CSV_MAX_COLUMNS}")
        for field in row:
            if len(field) > CSV_MAX_FIELD_CHARS:
                raise InputError(source, f"line {reader.line_num}: has a field of {len(field):,} characters, "
                                         f"more than {CSV_MAX_FIELD_CHARS:,}")
        yield reader.line_num, row
