package dev.fencepost.bench.streams;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.Test;

public class ReshapeTest {
  private final Reshape reshape = new Reshape();

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  // An event as bench/compare/internal/events writes it.
  private static final String PURCHASE = "{\"id\":7,\"ts\":1764547200000000,\"type\":\"purchase\",\"user\":\"u42\","
      + "\"session\":\"s-0000abcd\",\"product\":\"sku-17\",\"category\":\"books\",\"price\":12.5,\"qty\":3,"
      + "\"currency\":\"EUR\",\"country\":\"DE\",\"device\":\"app\"}";

  @Test
  public void reshapesAPurchaseKeyedByUser() {
    Reshape.Purchase p = reshape.apply(b(PURCHASE));
    assertEquals("u42", p.user());
    assertEquals("{\"order\":7,\"user\":\"u42\",\"product\":\"sku-17\",\"amount\":37.5,\"currency\":\"EUR\",\"ts\":1764547200000000}",
        new String(p.value(), StandardCharsets.UTF_8));
  }

  @Test
  public void integerPriceAndNestedFields() {
    Reshape.Purchase p = reshape.apply(b("{\"extra\":{\"a\":[1,{\"type\":\"view\"}]},\"type\":\"purchase\",\"id\":1,\"user\":\"u1\","
        + "\"product\":\"p\",\"price\":2,\"qty\":4,\"currency\":\"USD\",\"ts\":5}"));
    assertEquals("{\"order\":1,\"user\":\"u1\",\"product\":\"p\",\"amount\":8.0,\"currency\":\"USD\",\"ts\":5}",
        new String(p.value(), StandardCharsets.UTF_8));
  }

  @Test
  public void dropsOtherTypes() {
    for (String type : new String[] {"\"view\"", "\"cart\"", "\"Purchase\"", "1", "null"}) {
      assertNull(type, reshape.apply(b(PURCHASE.replace("\"purchase\"", type))));
    }
    assertNull(reshape.apply(b("{}")));
  }

  @Test
  public void rejectsWhatIsNotOneJsonObject() {
    String[] bad = {"", "not json", "[1,2]", "{\"type\":\"view\"", "{\"type\":\"view\"} {}", "{\"type\":\"view\",}", "\"purchase\""};
    for (String v : bad) {
      Reshape.BadEventException e = assertThrows(v, Reshape.BadEventException.class, () -> reshape.apply(b(v)));
      assertTrue(e.getMessage(), e.getMessage().startsWith("bad shop event ("));
    }
    assertThrows(Reshape.BadEventException.class, () -> reshape.apply(null));
  }

  @Test
  public void namesTheMissingOrMistypedFieldOfAPurchase() {
    Reshape.BadEventException e = assertThrows(Reshape.BadEventException.class,
        () -> reshape.apply(b(PURCHASE.replace("\"product\":\"sku-17\",", ""))));
    assertTrue(e.getMessage(), e.getMessage().contains("a purchase without \"product\""));
    e = assertThrows(Reshape.BadEventException.class, () -> reshape.apply(b(PURCHASE.replace("\"qty\":3", "\"qty\":\"3\""))));
    assertTrue(e.getMessage(), e.getMessage().contains("\"qty\" is VALUE_STRING, want a number"));
    e = assertThrows(Reshape.BadEventException.class, () -> reshape.apply(b(PURCHASE.replace("\"id\":7", "\"id\":7.5"))));
    assertTrue(e.getMessage(), e.getMessage().contains("\"id\" is VALUE_NUMBER_FLOAT, want an integer"));
  }
}
