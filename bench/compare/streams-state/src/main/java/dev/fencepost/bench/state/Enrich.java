package dev.fencepost.bench.state;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The join's value joiner, what fencepost's join stage does to a record: the
 * stream record's value must be one JSON object; the output is that object
 * with the table's row (JSON) as its member {@code as} (replacing a member of
 * that name). It streams the object through Jackson's parser and generator
 * (no tree), the cheapest way that still checks the value. Safe for
 * concurrent use: each call has its own parser and generator.
 */
final class Enrich {
  private final JsonFactory json = new JsonFactory();
  private final String as;

  Enrich(String as) {
    this.as = as;
  }

  /**
   * Returns value with row added under {@code as}.
   *
   * @throws IllegalArgumentException if value is not one JSON object
   */
  byte[] apply(byte[] value, byte[] row) {
    ByteArrayOutputStream out = new ByteArrayOutputStream(value.length + row.length + as.length() + 8);
    try (JsonParser p = json.createParser(value); JsonGenerator g = json.createGenerator(out)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new IllegalArgumentException("join: the record's value is not a JSON object");
      }
      g.writeStartObject();
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        if (name.equals(as)) {
          p.skipChildren();
          continue;
        }
        g.writeFieldName(name);
        g.copyCurrentStructure(p);
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw new IllegalArgumentException("join: the record's value is not one JSON object");
      }
      g.writeFieldName(as);
      g.writeRawValue(new String(row, StandardCharsets.UTF_8));
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException("join: the record's value is not JSON", e);
    }
    return out.toByteArray();
  }
}
