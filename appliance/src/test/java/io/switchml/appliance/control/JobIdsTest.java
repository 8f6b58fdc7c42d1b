package io.switchml.appliance.control;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Job ids as logic: increasing, never two live jobs on one result group (id mod 65536), positive after the wrap.
 */
final class JobIdsTest
{
    @Test
    void idsIncreaseAndAnIdNotTakenIsOfferedAgain()
    {
        final JobIds ids = new JobIds();

        assertEquals(1, ids.peek(List.of()));
        assertEquals(1, ids.peek(List.of()), "a refused creation does not use its id up");
        ids.take(1);
        assertEquals(2, ids.peek(List.of(1)));
        ids.take(2);
        assertEquals(3, ids.peek(List.of()), "an ended job's id is not handed out again");
    }

    @Test
    void anIdWhoseResultGroupALiveJobHoldsIsSkipped()
    {
        final JobIds ids = new JobIds();
        ids.startAt(65_537);

        assertEquals(65_538, ids.peek(List.of(1)), "job 65,537 would share job 1's group");
        assertEquals(65_537, ids.peek(List.of(2)));
        assertEquals(65_540, ids.peek(List.of(1, 2, 3, 7)));
    }

    @Test
    void idsStayPositiveAfterTheLargestAndSkipLiveOnes()
    {
        final JobIds ids = new JobIds();
        ids.startAt(Integer.MAX_VALUE);

        assertEquals(Integer.MAX_VALUE, ids.peek(List.of(1)));
        ids.take(Integer.MAX_VALUE);
        assertEquals(2, ids.peek(List.of(1, Integer.MAX_VALUE)));
    }
}
