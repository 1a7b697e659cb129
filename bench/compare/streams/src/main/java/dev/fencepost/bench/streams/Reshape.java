package dev.fencepost.bench.streams;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;

/**
 * The benchmark's record step, the same as the other engines' pipelines
 * (bench/compare/configs/fencepost-defaults.yaml): parse the shop event's
 * JSON value, keep it only if its {@code type} is {@code "purchase"}, and
 * reshape it to {@code {"order","user","product","amount","currency","ts"}}
 * (amount = price * qty), keyed by user.
 *
 * <p>The whole value is parsed, kept or not, so that a value that is not
 * one JSON object fails here as it does in the other engines' {@code json}
 * step. Instances are safe for concurrent use: the factory is shared, each
 * call has its own parser and generator.
 */
final class Reshape {
  /** The event type kept. */
  static final String KEPT = "purchase";

  /** A purchase reshaped: the output record's key and value. */
  record Purchase(String user, byte[] value) {}

  /** A value that is not a shop event the pipeline can reshape. */
  static final class BadEventException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    BadEventException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private final JsonFactory json = new JsonFactory();

  /**
   * Returns the reshaped purchase, or null if the event is of another type.
   *
   * @throws BadEventException if value is not one JSON object, or a
   *     purchase lacks one of id, user, product, price, qty, currency and
   *     ts or has one of the wrong JSON type; the message names it
   */
  Purchase apply(byte[] value) {
    if (value == null) {
      throw new BadEventException("the record has no value (a tombstone): want a JSON shop event", null);
    }
    long id = 0, ts = 0;
    double price = 0, qty = 0;
    String type = null, user = null, product = null, currency = null;
    int have = 0; // bits: which of the purchase's fields were read
    try (JsonParser p = json.createParser(value)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw bad(value, "not a JSON object", null);
      }
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        switch (name) {
          case "type" -> type = v == JsonToken.VALUE_STRING ? p.getText() : null;
          case "id" -> {
            id = integer(p, v, value, name);
            have |= 1;
          }
          case "user" -> {
            user = string(p, v, value, name);
            have |= 2;
          }
          case "product" -> {
            product = string(p, v, value, name);
            have |= 4;
          }
          case "price" -> {
            price = number(p, v, value, name);
            have |= 8;
          }
          case "qty" -> {
            qty = number(p, v, value, name);
            have |= 16;
          }
          case "currency" -> {
            currency = string(p, v, value, name);
            have |= 32;
          }
          case "ts" -> {
            ts = integer(p, v, value, name);
            have |= 64;
          }
          default -> p.skipChildren();
        }
      }
      if (t != JsonToken.END_OBJECT || p.nextToken() != null) {
        throw bad(value, "not one JSON object", null);
      }
    } catch (JsonProcessingException e) {
      throw bad(value, "invalid JSON: " + e.getOriginalMessage(), e);
    } catch (IOException e) { // parsing memory has no other failure
      throw bad(value, "invalid JSON: " + e.getMessage(), e);
    }
    if (!KEPT.equals(type)) {
      return null;
    }
    if (have != 127) {
      String[] names = {"id", "user", "product", "price", "qty", "currency", "ts"};
      for (int i = 0; i < names.length; i++) {
        if ((have & (1 << i)) == 0) {
          throw bad(value, "a purchase without \"" + names[i] + "\"", null);
        }
      }
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream(128);
    try (JsonGenerator g = json.createGenerator(out)) {
      g.writeStartObject();
      g.writeNumberField("order", id);
      g.writeStringField("user", user);
      g.writeStringField("product", product);
      g.writeNumberField("amount", price * qty);
      g.writeStringField("currency", currency);
      g.writeNumberField("ts", ts);
      g.writeEndObject();
    } catch (IOException e) { // writes to memory do not fail
      throw new IllegalStateException(e);
    }
    return new Purchase(user, out.toByteArray());
  }

  private static long integer(JsonParser p, JsonToken v, byte[] value, String name) throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT) {
      throw bad(value, "\"" + name + "\" is " + v + ", want an integer", null);
    }
    return p.getLongValue();
  }

  private static double number(JsonParser p, JsonToken v, byte[] value, String name) throws IOException {
    if (v != JsonToken.VALUE_NUMBER_INT && v != JsonToken.VALUE_NUMBER_FLOAT) {
      throw bad(value, "\"" + name + "\" is " + v + ", want a number", null);
    }
    return p.getDoubleValue();
  }

  private static String string(JsonParser p, JsonToken v, byte[] value, String name) throws IOException {
    if (v != JsonToken.VALUE_STRING) {
      throw bad(value, "\"" + name + "\" is " + v + ", want a string", null);
    }
    return p.getText();
  }

  private static BadEventException bad(byte[] value, String what, Throwable cause) {
    String shown = new String(value, 0, Math.min(value.length, 80), java.nio.charset.StandardCharsets.UTF_8);
    return new BadEventException("bad shop event (" + what + "): " + shown + (value.length > 80 ? "..." : ""), cause);
  }
}
