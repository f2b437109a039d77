"""keras.io/examples/rl/actor_critic_cartpole, typed with ``tf.GradientTape`` -> ``md.GradientTape``: a
two-headed model (softmax actor, linear critic) called step by step inside one tape per episode, actions
drawn with ``np.random.choice(p=np.squeeze(action_probs))``, discounted and normalised returns, the actor
loss ``-log_prob * diff`` and ``Huber`` critic loss summed over the episode, ``tape.gradient`` and
``optimizer.apply_gradients`` (in cross-replica context: the episode runs outside ``strategy.run``, as a TF
user runs it after building the model in ``strategy.scope()``; every replica's copy gets the update).

Keras 3 (torch backend) runs it on no device: its model's outputs are torch tensors, which ``np.squeeze``
cannot read while they require grad (the example needs Keras 3's TensorFlow backend, ``tf.GradientTape``).
The environment is a small deterministic CartPole (gym's equations, its 0.2095 rad / 2.4 limits) instead of
``gym.make("CartPole-v0")``. Shrunk: 16 hidden units, 3 episodes of at most 30 steps.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/rl/actor_critic_cartpole/"
gamma = 0.99  # Discount factor for past rewards
max_steps_per_episode = 30
eps = np.finfo(np.float32).eps.item()  # Smallest number such that 1.0 + eps != 1.0


class CartPole:
    """gym's CartPole-v0 dynamics (Euler steps of 0.02 s), reset to a seeded small random state."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        return self.state.astype("float32"), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta**2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * xacc, theta + 0.02 * theta_dot,
                               theta_dot + 0.02 * thetaacc])
        done = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 0.2095)
        return self.state.astype("float32"), 1.0, done, False, {}


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    env = CartPole(seed=42)
    np.random.seed(0)
    keras.utils.set_random_seed(0)
    num_inputs = 4
    num_actions = 2
    num_hidden = 16
    with strategy.scope():
        inputs = layers.Input(shape=(num_inputs,))
        common = layers.Dense(num_hidden, activation="relu")(inputs)
        action = layers.Dense(num_actions, activation="softmax")(common)
        critic = layers.Dense(1)(common)
        model = keras.Model(inputs=inputs, outputs=[action, critic])
        optimizer = keras.optimizers.Adam(learning_rate=0.01)
        huber_loss = keras.losses.Huber()
    action_probs_history = []
    critic_value_history = []
    rewards_history = []
    running_reward = 0
    episode_count = 0
    out = {"episode_reward": [], "loss": [], "running_reward": []}

    while episode_count < 3 * scale:  # Run until solved (here: 3 episodes)
        state = env.reset()[0]
        episode_reward = 0
        with md.GradientTape() as tape:
            for timestep in range(1, max_steps_per_episode):
                state = ops.convert_to_tensor(state)
                state = ops.expand_dims(state, 0)
                # Predict action probabilities and estimated future rewards from environment state
                action_probs, critic_value = model(state)
                critic_value_history.append(critic_value[0, 0])
                # Sample action from action probability distribution
                action = np.random.choice(num_actions, p=np.squeeze(action_probs))
                action_probs_history.append(ops.log(action_probs[0, action]))
                # Apply the sampled action in our environment
                state, reward, done, *_ = env.step(action)
                rewards_history.append(reward)
                episode_reward += reward
                if done:
                    break
            # Update running reward to check condition for solving
            running_reward = 0.05 * episode_reward + (1 - 0.05) * running_reward
            # Calculate expected value from rewards
            returns = []
            discounted_sum = 0
            for r in rewards_history[::-1]:
                discounted_sum = r + gamma * discounted_sum
                returns.insert(0, discounted_sum)
            # Normalize
            returns = np.array(returns)
            returns = (returns - np.mean(returns)) / (np.std(returns) + eps)
            returns = returns.tolist()
            # Calculating loss values to update our network
            history = zip(action_probs_history, critic_value_history, returns)
            actor_losses = []
            critic_losses = []
            for log_prob, value, ret in history:
                diff = ret - value
                actor_losses.append(-log_prob * diff)  # actor loss
                critic_losses.append(huber_loss(ops.expand_dims(value, 0), ops.expand_dims(ret, 0)))
            # Backpropagation
            loss_value = sum(actor_losses) + sum(critic_losses)
            grads = tape.gradient(loss_value, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            # Clear the loss and reward history
            action_probs_history.clear()
            critic_value_history.clear()
            rewards_history.clear()
        episode_count += 1
        out["episode_reward"].append(episode_reward)
        out["loss"].append(float(loss_value))
        out["running_reward"].append(running_reward)
    probe = np.random.RandomState(1).uniform(-0.05, 0.05, (4, 4)).astype("float32")
    action_probs, critic_value = model.predict(probe, verbose=0)
    return {"_model": model, **out, "action_probs": action_probs, "critic_value": critic_value}
